"""The notification outbox: who is told what, written in the same transaction as the events.

``do_commands`` asks :func:`watch` once per transaction, before it applies anything: one query
answers which event types anybody in the workspace may want (an enabled webhook's, a person's
e-mail choice). When nobody wants anything, that query is all an append pays. Otherwise the
watcher notes the run's status and its waiting gates, and after the append
:meth:`Watcher.record` compares: a gate that waits now and did not before is ``gate.requested``
(requested by an event, or implied by the gate policy when its step became ready), a
``human_gate_resolved`` event is ``gate.resolved``, a final status is ``run.completed`` /
``run.failed`` / ``run.cancelled``, and a replay's divergence note is ``run.diverged``.

Each message to each destination is one :class:`runs.models.Delivery` row; the task that sends
them is scheduled inside the same transaction (``runs.actions.notify.schedule_deliveries``), so
a rollback leaves neither behind and a commit leaves both. Payloads are thin (ids and URLs, the
receiver reads details with its own credentials) and stay under 20 KB.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings
from django.db import connection
from django.utils import timezone

from runs.actions.notify import schedule_deliveries
from runs.actions.permissions import Action, Role, needed_scopes, role_allows
from runs.engine.divergence import DIVERGED_TAG
from runs.engine.state import RunState
from runs.ids import run_path_segment
from runs.models import (
    Delivery,
    DeliveryChannel,
    Membership,
    NotificationPreference,
    Run,
    Webhook,
    WebhookKind,
    Workspace,
)
from runs.protocol.values import dumps, loads

GATE_REQUESTED = "gate.requested"
GATE_RESOLVED = "gate.resolved"
RUN_COMPLETED = "run.completed"
RUN_FAILED = "run.failed"
RUN_CANCELLED = "run.cancelled"
RUN_DIVERGED = "run.diverged"
MONITOR_STATE_CHANGED = "monitor.state_changed"  # runs.actions.monitors: a monitor changed state
JUDGE_SUSPENDED = "judge.suspended"  # a gate judge's delegation suspended itself (judges app)
BUDGET_EXCEEDED = "budget.exceeded"  # runs.actions.budgets: self-reported calls passed the monthly cap
EVENT_TYPES: tuple[str, ...] = (
    GATE_REQUESTED,
    GATE_RESOLVED,
    RUN_COMPLETED,
    RUN_FAILED,
    RUN_CANCELLED,
    RUN_DIVERGED,
    MONITOR_STATE_CHANGED,
    JUDGE_SUSPENDED,
    BUDGET_EXCEEDED,
)
# Sent by the "Send test event" button only; hooks never subscribe to it.
TEST_EVENT = "webhook.test"
# E-mailed to owners when the worker gives up on a hook.
HOOK_DISABLED = "webhook.disabled"
FINAL = {"completed": RUN_COMPLETED, "failed": RUN_FAILED, "cancelled": RUN_CANCELLED}
# "runs I started": what the person who started a run hears about it.
STARTER_EVENTS = frozenset({GATE_RESOLVED, RUN_COMPLETED, RUN_FAILED, RUN_CANCELLED, RUN_DIVERGED})
MAX_PAYLOAD_BYTES = 20_000
_TEXT_LIMIT = 1000  # a reason or title in a payload: cut here (the receiver reads the run for more)


def new_message_id() -> str:
    return "msg_" + secrets.token_hex(13)  # 30 characters, the webhook-id of every attempt


_seen_origin: str | None = None  # the origin this process was last reached at (when unset)


def remember_origin(origin: str) -> None:
    """The origin a request reached this server at (its Host checked against ALLOWED_HOSTS by
    then): the links of notifications use it when ``WORKBENCH_SITE_URL`` is not set, so a server
    on another port or host than 127.0.0.1:8000 links to itself (runs.web.origin)."""
    global _seen_origin
    _seen_origin = origin.rstrip("/")


def site_url() -> str:
    configured = getattr(settings, "WORKBENCH_SITE_URL", "")
    return (configured or _seen_origin or "http://127.0.0.1:8000").rstrip("/")


def run_links(run_id: str) -> dict[str, str]:
    segment = run_path_segment(run_id)
    base = site_url()
    return {
        "url": f"{base}/runs/{segment}/",
        "apiUrl": f"{base}/api/runs/{segment}",
    }


def _clip(text: object, limit: int = _TEXT_LIMIT) -> str | None:
    if not isinstance(text, str):
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"


def envelope(event_type: str, data: dict, *, at: datetime | None = None) -> str:
    """The Standard Webhooks body ``{type, timestamp, data}`` as compact JSON text (< 20 KB)."""
    stamp = (at or timezone.now()).astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    body = dumps({"type": event_type, "timestamp": stamp, "data": data})
    if len(body.encode()) > MAX_PAYLOAD_BYTES:  # only free text can make it large: drop it
        for section in ("gate", "run"):
            if isinstance(data.get(section), dict):
                data[section] = {k: v for k, v in data[section].items() if k not in ("reason", "title")}
        data["truncated"] = True
        body = dumps({"type": event_type, "timestamp": stamp, "data": data})
    return body


def _gate_key(gate: dict) -> tuple:
    return (gate["stepId"], gate["gate"], gate.get("checkpoint"))


def _deciders() -> dict:
    return {
        "roles": [r.value for r in Role if role_allows(r, Action.RESOLVE_GATE)],
        "tokenScopes": list(needed_scopes(Action.RESOLVE_GATE)),
    }


@dataclass
class Message:
    event_type: str
    data: dict


@dataclass(frozen=True)
class HookRef:
    """What the outbox needs of an enabled hook (read with the one query of :func:`listeners`)."""

    pk: int
    kind: str
    events: frozenset[str]

    def wants(self, event_type: str) -> bool:
        return event_type in self.events


@dataclass
class Interest:
    hooks: list[HookRef]
    preferences: list[NotificationPreference]
    roles: dict[int, str] = field(default_factory=dict)  # user pk -> role in the workspace

    def wants(self, event_type: str, *, run: Run) -> bool:
        if any(hook.wants(event_type) for hook in self.hooks):
            return True
        return any(self._email_wanted(p, event_type, run) for p in self.preferences)

    def _email_wanted(self, pref: NotificationPreference, event_type: str, run: Run) -> bool:
        role = self.roles.get(pref.user_id)
        if role is None or not pref.user.email or not pref.user.is_active:
            return False
        if event_type == GATE_REQUESTED:
            return pref.gates_to_decide and role_allows(role, Action.RESOLVE_GATE)
        if event_type in STARTER_EVENTS:
            return (
                pref.runs_i_started
                and run.created_by == f"user:{pref.user.get_username()}"
                and role_allows(role, Action.VIEW_RUN)
            )
        return False


_LISTENERS_SQL = None  # built on first use (table names come from the models)


def _listeners_sql() -> str:
    global _LISTENERS_SQL
    if _LISTENERS_SQL is None:
        quote = connection.ops.quote_name
        hooks, prefs = quote(Webhook._meta.db_table), quote(NotificationPreference._meta.db_table)
        _LISTENERS_SQL = (
            f"SELECT id, kind, events, NULL, NULL FROM {hooks} WHERE workspace_id = %s AND enabled"
            f" UNION ALL SELECT NULL, NULL, NULL, gates_to_decide, runs_i_started FROM {prefs}"
            " WHERE workspace_id = %s AND (gates_to_decide OR runs_i_started)"
        )
    return _LISTENERS_SQL


@dataclass(frozen=True)
class Listeners:
    hooks: tuple[HookRef, ...]
    by_email: frozenset[str]  # event types somebody's e-mail choice may want

    @property
    def wanted(self) -> frozenset[str]:
        return self.by_email.union(*(hook.events for hook in self.hooks))


def listeners(workspace_id: int) -> Listeners | None:
    """The workspace's enabled hooks and the event types people's choices may want, in one small
    query; None when there are none (most workspaces, most of the time)."""
    hooks: list[HookRef] = []
    by_email: set[str] = set()
    with connection.cursor() as cursor:
        cursor.execute(_listeners_sql(), [workspace_id, workspace_id])
        for pk, kind, events, gates, runs in cursor.fetchall():
            if pk is not None:
                hooks.append(
                    HookRef(pk, kind, frozenset(loads(events) if isinstance(events, str) else events))
                )
            if gates:
                by_email.add(GATE_REQUESTED)
            if runs:
                by_email.update(STARTER_EVENTS)
    if not hooks and not by_email:
        return None
    return Listeners(tuple(hooks), frozenset(by_email))


def interest_of(workspace_id: int, found: Listeners | None = None) -> Interest:
    """What the workspace's enabled hooks and its people's choices ask for (the people's
    details are read only when somebody's choice may want something)."""
    if found is None:
        found = listeners(workspace_id) or Listeners((), frozenset())
    if not found.by_email:
        return Interest(hooks=list(found.hooks), preferences=[])
    preferences = list(
        NotificationPreference.objects.filter(workspace_id=workspace_id)
        .exclude(gates_to_decide=False, runs_i_started=False)
        .select_related("user")
    )
    roles = {}
    if preferences:
        roles = dict(
            Membership.objects.filter(
                workspace_id=workspace_id, user_id__in=[p.user_id for p in preferences]
            ).values_list("user_id", "role")
        )
    return Interest(hooks=list(found.hooks), preferences=preferences, roles=roles)


@dataclass
class Watcher:
    """A run's notifiable state before an append, to compare with the state after it."""

    run: Run
    found: Listeners
    status: str
    gates: frozenset

    def record(
        self, events: Sequence[dict], state: RunState, *, actor: str = "", channel: str = "page"
    ) -> int:
        """Write the outbox rows this append causes; returns how many. The hooks and choices are
        read only when the append has something to say (most appends have not)."""
        wanted = self.found.wanted
        candidates = [m for m in self._messages(events, state, actor, channel) if m.event_type in wanted]
        if not candidates:
            return 0
        interest = interest_of(self.run.workspace_id, self.found)
        messages = [m for m in candidates if interest.wants(m.event_type, run=self.run)]
        return write_messages(self.run, interest, messages)

    def _messages(
        self, events: Sequence[dict], state: RunState, actor: str, channel: str = "page"
    ) -> Iterable[Message]:
        run = self.run
        links = run_links(run.run_id)
        run_data = {"id": run.run_id, "title": _clip(run.title, 300), **links}
        base = {"workspace": run.workspace.slug}
        for gate in state.pending_gates():
            if _gate_key(gate) in self.gates:
                continue
            yield Message(
                GATE_REQUESTED,
                {
                    **base,
                    "run": {**run_data, "status": state.status},
                    "gate": {
                        "stepId": gate["stepId"],
                        "gate": gate["gate"],
                        "checkpoint": gate.get("checkpoint"),
                        "reason": _clip(gate.get("reason")),
                        "requestedAt": gate.get("requestedAt"),
                        "url": links["url"] + "#gate-panel",
                        "mayDecide": _deciders(),
                    },
                },
            )
        for event in events:
            kind = event.get("type")
            if kind == "human_gate_resolved":
                yield Message(
                    GATE_RESOLVED,
                    {
                        **base,
                        "run": {**run_data, "status": state.status},
                        "gate": {
                            "stepId": event.get("stepId"),
                            "gate": event.get("gate"),
                            "decision": event.get("decision"),
                            "decidedBy": actor or None,
                            "channel": channel,
                            "eventId": event.get("id"),
                            "url": links["url"] + "#gate-panel",
                        },
                    },
                )
            elif kind == "annotation" and DIVERGED_TAG in (event.get("tags") or ()):
                yield Message(RUN_DIVERGED, {**base, "run": {**run_data, "status": state.status}})
        final = FINAL.get(state.status)
        if final and state.status != self.status:
            reason = next(
                (
                    e.get("reason")
                    for e in reversed(events)
                    if e.get("type") == "run_status_changed" and e.get("status") == state.status
                ),
                None,
            )
            yield Message(
                final, {**base, "run": {**run_data, "status": state.status, "reason": _clip(reason)}}
            )


def watch(workspace: Workspace, run: Run, state: RunState) -> Watcher | None:
    """Before an append: None when nobody in the workspace listens (one query), else a watcher."""
    found = listeners(workspace.pk)
    if found is None:
        return None
    run.workspace = workspace  # the slug for the payloads, without a query
    return Watcher(
        run=run,
        found=found,
        status=state.status,
        gates=frozenset(_gate_key(g) for g in state.pending_gates()),
    )


def record_new_run(workspace: Workspace, run: Run, state: RunState, *, actor: str = "") -> int:
    """The outbox rows of a run that starts out waiting: a gate implied when the run is created
    (a ``PAUSE_BEFORE`` first step, a fork made at an undecided gate) is requested like one that
    starts waiting during an append. Called in the transaction that creates the run."""
    found = listeners(workspace.pk)
    if found is None or not state.pending_gates():
        return 0
    run.workspace = workspace
    return Watcher(run=run, found=found, status=state.status, gates=frozenset()).record(
        [], state, actor=actor
    )


def write_messages(
    run: Run | None, interest: Interest, messages: Sequence[Message], *, workspace=None
) -> int:
    """One Delivery row per message and destination; schedules the sender in this transaction."""
    if not messages:
        return 0
    now = timezone.now()
    workspace_id = run.workspace_id if run is not None else workspace.pk
    rows: list[Delivery] = []
    for message in messages:
        body = envelope(message.event_type, message.data, at=now)
        for hook in interest.hooks:
            if hook.wants(message.event_type):
                channel = DeliveryChannel.SLACK if hook.kind == WebhookKind.SLACK else DeliveryChannel.WEBHOOK
                rows.append(
                    _row(workspace_id, message.event_type, body, now, channel=channel, webhook_id=hook.pk)
                )
        if run is None:
            continue
        for pref in interest.preferences:
            if interest._email_wanted(pref, message.event_type, run):
                rows.append(
                    _row(
                        workspace_id,
                        message.event_type,
                        body,
                        now,
                        channel=DeliveryChannel.EMAIL,
                        recipient=pref.user,
                    )
                )
    if rows:
        Delivery.objects.bulk_create(rows)
        schedule_deliveries()
    return len(rows)


def tell_owners(workspace: Workspace, event_type: str, data: dict) -> int:
    """One message about the workspace itself (not a run) to its owners: an e-mail to each owner
    with an address, and a post to each enabled hook that subscribes to ``event_type``. Call it in
    the transaction that records what it says (a rollback leaves no message behind)."""
    body = envelope(event_type, {"workspace": workspace.slug, **data})
    now = timezone.now()
    rows = [
        _row(workspace.pk, event_type, body, now, channel=DeliveryChannel.EMAIL, recipient=m.user)
        for m in Membership.objects.filter(workspace=workspace, role=Role.OWNER).select_related("user")
        if m.user.email and m.user.is_active
    ]
    found = listeners(workspace.pk)
    for hook in found.hooks if found is not None else ():
        if hook.wants(event_type):
            channel = DeliveryChannel.SLACK if hook.kind == WebhookKind.SLACK else DeliveryChannel.WEBHOOK
            rows.append(_row(workspace.pk, event_type, body, now, channel=channel, webhook_id=hook.pk))
    if rows:
        Delivery.objects.bulk_create(rows)
        schedule_deliveries()
    return len(rows)


def _row(workspace_id: int, event_type: str, body: str, now, **fields) -> Delivery:
    return Delivery(
        public_id=new_message_id(),
        workspace_id=workspace_id,
        event_type=event_type,
        payload=body,
        next_attempt_at=now,
        **fields,
    )
