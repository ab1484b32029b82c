"""Which model an "Open in playground" restores, and what the page says about it.

Pure functions over plain data (no Django): the view lists the workspace's models as
:class:`Candidate` values, recomposes the restored session for the chosen one, and shows the
:class:`Restoration` text. The page says "restored exactly" only when the recorded provider and
model are configured *and* the recomposed request equals the recorded one; otherwise it says
plainly what was substituted or left out, and why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

PROVIDER_NAMES = {"anthropic": "Anthropic", "openai": "OpenAI"}

EXACT = "exact"  # recorded provider and model, the very request
PARTIAL = "partial"  # recorded provider and model, some recorded fields not carried over
OTHER_MODEL = "other_model"  # recorded provider, another of its models
OTHER_PROVIDER = "other_provider"  # the recorded provider has no model here: another provider's
NO_MODEL = "no_model"  # nothing configured

NOT_REQUEST_CONTENT = frozenset({"model", "stream", "stream_options"})


@dataclass(frozen=True)
class Candidate:
    """One model the workspace can send to."""

    pk: int
    kind: str  # provider kind: "anthropic" | "openai"
    model_id: str
    label: str  # display name
    usable: bool = True


@dataclass(frozen=True)
class Restoration:
    model_pk: int | None
    status: str
    message: str
    substituted: bool
    not_carried: tuple[str, ...] = field(default_factory=tuple)

    def as_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "message": self.message,
            "substituted": self.substituted,
            "not_carried": list(self.not_carried),
        }


def provider_name(kind: str) -> str:
    return PROVIDER_NAMES.get(kind, kind or "an unknown provider")


def choose_model(
    *, kind: str, model_id: str, candidates: Sequence[Candidate], default_pk: int | None
) -> tuple[Candidate | None, str]:
    """The recorded model when configured; else a model of the recorded provider (the default if it
    is one); else the workspace default (or the first model). Models that can send (their provider
    has its key) come first: a listed model that cannot send is not "configured". Returns
    (candidate, status)."""
    pool = [c for c in candidates if c.usable] or list(candidates)
    same_kind = [c for c in pool if c.kind == kind]
    exact = next((c for c in same_kind if model_id and c.model_id == model_id), None)
    if exact is not None:
        return exact, EXACT
    default = next((c for c in pool if c.pk == default_pk), None)
    if same_kind:
        return (default if default is not None and default.kind == kind else same_kind[0]), OTHER_MODEL
    chosen = default if default is not None else (pool[0] if pool else None)
    return chosen, (OTHER_PROVIDER if chosen is not None else NO_MODEL)


def listed_but_unusable(*, kind: str, model_id: str, candidates: Sequence[Candidate]) -> bool:
    """The recorded model is in the list, but its provider cannot send (no API key)."""
    return any(c.kind == kind and c.model_id == model_id and not c.usable for c in candidates)


def fields_not_carried(recorded: Mapping[str, Any], recomposed: Mapping[str, Any]) -> tuple[str, ...]:
    """Top-level fields of the recorded request that the recomposed one lacks or sends otherwise
    (``model`` aside: it is the model choice, reported separately; streaming is how the playground
    sends, not what it asks)."""
    return tuple(
        sorted(
            k
            for k, v in recorded.items()
            if k not in NOT_REQUEST_CONTENT and (k not in recomposed or recomposed[k] != v)
        )
    )


def describe(
    *,
    kind: str,
    model_id: str,
    chosen: Candidate | None,
    status: str,
    recorded: Mapping[str, Any] | None = None,
    recomposed: Mapping[str, Any] | None = None,
    unusable: bool = False,
) -> Restoration:
    """The sentence the page shows about the model choice and what the request carries over."""
    recorded_name = f"{model_id or 'an unnamed model'} ({provider_name(kind)})"
    why = (
        "which is listed here but cannot send (its provider has no API key)"
        if unusable
        else "which is not configured in this workspace"
    )
    if chosen is None:
        return Restoration(
            None,
            NO_MODEL,
            f"The recorded call used {recorded_name}, and no model is configured in this workspace: "
            "add a provider and a model in the playground settings to re-run it.",
            substituted=True,
        )
    restoration = _describe_choice(
        chosen,
        status,
        kind=kind,
        recorded=recorded,
        recomposed=recomposed,
        recorded_name=recorded_name,
        why=why,
    )
    if chosen.usable:
        return restoration
    note = f" {chosen.label} cannot send until its provider has an API key."
    return replace(restoration, message=restoration.message + note)


def _describe_choice(
    chosen: Candidate,
    status: str,
    *,
    kind: str,
    recorded: Mapping[str, Any] | None,
    recomposed: Mapping[str, Any] | None,
    recorded_name: str,
    why: str,
) -> Restoration:
    chosen_name = f"{chosen.label} ({chosen.model_id}, {provider_name(chosen.kind)})"
    if status == EXACT:
        missing = fields_not_carried(recorded or {}, recomposed or {}) if recorded is not None else ()
        if recomposed is not None and not missing:
            return Restoration(
                chosen.pk,
                EXACT,
                f"Restored exactly: the recorded request to {recorded_name}, with its system prompt, "
                "messages and parameters. Edit it and send to compare.",
                substituted=False,
            )
        return Restoration(
            chosen.pk,
            PARTIAL,
            f"Restored with the recorded provider and model, {recorded_name}, its system prompt and "
            "messages. Not carried over (the playground has no setting for them): "
            f"{', '.join(missing) or 'the request could not be recomposed'}.",
            substituted=False,
            not_carried=missing,
        )
    if status == OTHER_MODEL:
        return Restoration(
            chosen.pk,
            OTHER_MODEL,
            f"Substituted: the recorded call used {recorded_name}, {why}, so {chosen_name} is selected instead (same provider, another model). The "
            "system prompt, messages and parameters are carried over; the answer may differ.",
            substituted=True,
        )
    return Restoration(
        chosen.pk,
        OTHER_PROVIDER,
        f"Substituted: the recorded call used {recorded_name}, {why}, and no {provider_name(kind)} "
        f"model here can send, so {chosen_name} is selected instead. The system prompt, "
        f"messages and parameters are rewritten for the {provider_name(chosen.kind)} API; settings "
        "it has no equivalent for are listed under the request preview. The answer will differ.",
        substituted=True,
    )
