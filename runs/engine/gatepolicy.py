"""Policies per gate: quorum, separation of duties, assignment and escalation. Pure.

A policy is a small JSON object (camelCase, as the REST API and ``run.metadata`` carry it)::

    {"quorum": 2,                    # distinct approvers needed (default 1)
     "rejections": 1,                # distinct rejections that reject (default 1: one rejects)
     "separationOfDuties": true,     # the run's starter (or its token's owner) cannot approve
     "assignees": ["alice", "role:owner"],   # who the gate goes to first ("assigned to me")
     "escalation": [{"afterSeconds": 3600, "notify": ["bob"]}]}  # tiers, each told once

Where it comes from, later wins key by key (:func:`merge`): the workspace default, the
workspace's entry for the run's workflow, the run's ``metadata["workbench.gatePolicy"]`` (what a
host sets when it starts a run of its workflow), and that object's ``steps[<stepId>]``.

:func:`tally` counts votes; :func:`due_tiers` says which escalation tiers a gate that has waited
``waited`` seconds is due to notify. Nothing here reads storage or the clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runs.engine.errors import EngineError, ErrorCode

METADATA_KEY = "workbench.gatePolicy"
ROLE_PREFIX = "role:"
ROLES = ("owner", "reviewer")
MAX_NAMES = 50
MAX_TIERS = 5
MAX_QUORUM = 20
KEYS = frozenset({"quorum", "rejections", "separationOfDuties", "assignees", "escalation"})


@dataclass(frozen=True)
class Tier:
    after_seconds: int
    notify: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"afterSeconds": self.after_seconds, "notify": list(self.notify)}


@dataclass(frozen=True)
class GatePolicy:
    quorum: int = 1
    rejections: int = 1
    separation_of_duties: bool = False
    assignees: tuple[str, ...] = ()
    escalation: tuple[Tier, ...] = field(default_factory=tuple)

    @property
    def needs_votes(self) -> bool:
        """True when one decision alone may not settle the gate (votes are recorded)."""
        return self.quorum > 1 or self.rejections > 1

    def to_json(self) -> dict[str, Any]:
        return {
            "quorum": self.quorum,
            "rejections": self.rejections,
            "separationOfDuties": self.separation_of_duties,
            "assignees": list(self.assignees),
            "escalation": [t.to_json() for t in self.escalation],
        }


DEFAULT = GatePolicy()


def _error(message: str, path: str) -> EngineError:
    return EngineError(ErrorCode.INVALID_INPUT, message, path)


def _count(value: Any, path: str) -> int:
    if type(value) is not int or not 1 <= value <= MAX_QUORUM:
        raise _error(f"{path} must be a whole number from 1 to {MAX_QUORUM}", path)
    return value


def _names(value: Any, path: str) -> list[str]:
    if not isinstance(value, list) or len(value) > MAX_NAMES:
        raise _error(
            f"{path} must be a list of at most {MAX_NAMES} usernames or role:owner / role:reviewer", path
        )
    out: list[str] = []
    for i, name in enumerate(value):
        if not isinstance(name, str) or not name.strip() or len(name) > 150:
            raise _error(f"{path}[{i}] must be a username (1 to 150 characters)", f"{path}[{i}]")
        name = name.strip()
        if name.startswith(ROLE_PREFIX) and name[len(ROLE_PREFIX) :] not in ROLES:
            raise _error(f"{path}[{i}]: a group is role:owner or role:reviewer", f"{path}[{i}]")
        if name not in out:
            out.append(name)
    return out


def check(raw: Any, path: str = "policy") -> dict[str, Any]:
    """A policy object checked and normalised (only the keys it sets); raises INVALID_INPUT."""
    if not isinstance(raw, dict):
        raise _error(f"{path} must be an object", path)
    unknown = sorted(set(raw) - KEYS - {"steps"})
    if unknown:
        raise _error(f"{path}: unknown key {unknown[0]!r} (known: {', '.join(sorted(KEYS))})", path)
    out: dict[str, Any] = {}
    for key in ("quorum", "rejections"):
        if key in raw:
            out[key] = _count(raw[key], f"{path}.{key}")
    if "separationOfDuties" in raw:
        if not isinstance(raw["separationOfDuties"], bool):
            raise _error(f"{path}.separationOfDuties must be true or false", f"{path}.separationOfDuties")
        out["separationOfDuties"] = raw["separationOfDuties"]
    if "assignees" in raw:
        out["assignees"] = _names(raw["assignees"], f"{path}.assignees")
    if "escalation" in raw:
        tiers = raw["escalation"]
        if not isinstance(tiers, list) or len(tiers) > MAX_TIERS:
            raise _error(
                f"{path}.escalation must be a list of at most {MAX_TIERS} tiers", f"{path}.escalation"
            )
        checked = []
        last = 0
        for i, tier in enumerate(tiers):
            where = f"{path}.escalation[{i}]"
            if not isinstance(tier, dict) or set(tier) - {"afterSeconds", "notify"}:
                raise _error(f"{where} must be {{afterSeconds, notify}}", where)
            after = tier.get("afterSeconds")
            if type(after) is not int or not 1 <= after <= 90 * 86400:
                raise _error(f"{where}.afterSeconds must be a whole number of seconds (1 to 90 days)", where)
            if after <= last:
                raise _error(f"{where}.afterSeconds must be later than the tier before it", where)
            last = after
            notify = _names(tier.get("notify"), f"{where}.notify")
            if not notify:
                raise _error(f"{where}.notify names nobody", f"{where}.notify")
            checked.append({"afterSeconds": after, "notify": notify})
        out["escalation"] = checked
    if "steps" in raw:
        steps = raw["steps"]
        if not isinstance(steps, dict):
            raise _error(f"{path}.steps must be an object of step id -> policy", f"{path}.steps")
        out["steps"] = {}
        for sid, sub in steps.items():
            sub_checked = check(sub, f"{path}.steps.{sid}")
            sub_checked.pop("steps", None)
            out["steps"][sid] = sub_checked
    return out


def _layered(layers: tuple[dict[str, Any] | None, ...], step_id: str | None) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for layer in layers:
        if not layer:
            continue
        try:
            checked = check(layer)
        except EngineError:
            continue
        steps = checked.pop("steps", {})
        merged.update(checked)
        if step_id is not None and step_id in steps:
            merged.update(steps[step_id])
    return merged


def merge(
    *layers: dict[str, Any] | None, step_id: str | None = None, host: dict[str, Any] | None = None
) -> GatePolicy:
    """The policy of one gate from checked layers (later wins key by key; each layer's
    ``steps[step_id]`` right after it). A layer that does not check is skipped, not fatal:
    a run's metadata is the host's, and a bad one must not stop its gates from being decided.

    ``host``: the run's own layer (its metadata, set by whoever started the run, the party its
    gates hold). It may ask for more than the layers before it, never for less: a higher quorum,
    fewer rejections to stop the run, separation of duties switched on; it cannot lower an
    owner's quorum or switch off their separation of duties. Its assignees and escalation (who
    is asked, and told) are taken as they are."""
    merged = _layered(layers, step_id)
    for key, value in _layered((host,), step_id).items():
        if key == "quorum":
            merged[key] = max(merged.get(key, 1), value)
        elif key == "rejections":
            merged[key] = min(merged.get(key, 1), value)
        elif key == "separationOfDuties":
            merged[key] = merged.get(key, False) or value
        else:
            merged[key] = value
    return GatePolicy(
        quorum=merged.get("quorum", 1),
        rejections=merged.get("rejections", 1),
        separation_of_duties=merged.get("separationOfDuties", False),
        assignees=tuple(merged.get("assignees", ())),
        escalation=tuple(Tier(t["afterSeconds"], tuple(t["notify"])) for t in merged.get("escalation", ())),
    )


@dataclass(frozen=True)
class Tally:
    approvals: tuple[str, ...]
    rejections: tuple[str, ...]
    outcome: str | None  # "approved", "rejected" or None (still waiting for votes)


def tally(policy: GatePolicy, votes: list[tuple[str, str]]) -> Tally:
    """``votes`` are (voter, decision) in order, one per voter; "edited" counts as approval."""
    approvals = tuple(v for v, d in votes if d in ("approved", "edited"))
    rejections = tuple(v for v, d in votes if d == "rejected")
    outcome = None
    if len(rejections) >= policy.rejections:
        outcome = "rejected"
    elif len(approvals) >= policy.quorum:
        outcome = "approved"
    return Tally(approvals, rejections, outcome)


def due_tiers(policy: GatePolicy, waited_seconds: float, notified: set[int]) -> list[int]:
    """Indices of the escalation tiers due after ``waited_seconds`` and not notified yet."""
    return [
        i
        for i, tier in enumerate(policy.escalation)
        if waited_seconds >= tier.after_seconds and i not in notified
    ]


def limit_seconds(policy: GatePolicy, notified: set[int]) -> int | None:
    """The wait after which the next tier is told (the inbox's "limit"), None when none is left."""
    return next((tier.after_seconds for i, tier in enumerate(policy.escalation) if i not in notified), None)


def names_user(names: tuple[str, ...] | list[str], username: str, role: str | None) -> bool:
    """Whether a list of assignees names this person, directly or through their role."""
    return username in names or (role is not None and f"{ROLE_PREFIX}{role}" in names)
