"""Listeners told about committed appends (the live path registers itself here).

Actions call `notify_on_commit` inside their transaction; listeners run only after the commit,
with JSON values (ids and seq ranges), never model instances.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.db import transaction

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunChange:
    workspace_id: int | None  # None: not a run (the playground's executions), no workspace broadcast
    run_id: str  # the protocol id (unique within the workspace only), or an execution's hub key
    first_seq: int  # 0 when no event was appended (a new run or a projection-only change)
    last_seq: int
    status: str
    run_pk: int = 0  # the run row's surrogate key: what live groups are named after
    # The events first_seq..last_seq as committed, and who appended them, when the action has them
    # at hand: in-process sinks (the transcript file) then need not read them back. Never sent on.
    events: tuple[dict, ...] = field(default=(), repr=False, compare=False)
    actor: str = field(default="", repr=False, compare=False)
    # The run row as this commit left it, when the action holds it (OTLP ingest): the transcript
    # sink then need not read it back. Never sent on.
    row: Any = field(default=None, repr=False, compare=False)
    # Whether a gate decision (``human_gate_resolved``) is among the events, for a change another
    # process committed (``events`` stays behind): None when not known. Listeners that act on a
    # decision (a fork waiting at its gate) skip a change that says False without a query.
    decided: bool | None = field(default=None, compare=False)

    def may_hold_decision(self) -> bool:
        """Whether a ``human_gate_resolved`` event may be among this change's events."""
        if self.events:
            return any(event.get("type") == "human_gate_resolved" for event in self.events)
        return self.decided is not False

    @classmethod
    def of(
        cls,
        run: Any,
        first_seq: int,
        last_seq: int,
        *,
        status: str | None = None,
        events: Sequence[dict] = (),
        actor: str = "",
        with_row: bool = False,
    ) -> RunChange:
        return cls(
            run.workspace_id,
            run.run_id,
            first_seq,
            last_seq,
            status or run.status,
            run.pk,
            tuple(events),
            actor,
            run if with_row else None,
        )


_listeners: list[Callable[[RunChange], None]] = []
# Durable sinks (the transcript files) run before every listener: on disk before any broadcast.
_durable: list[Callable[[RunChange], None]] = []
# A durable sink's way to take many changes of one commit at once (notify_many_on_commit).
_durable_batch: dict[Callable[[RunChange], None], Callable[[Sequence[RunChange]], None]] = {}


def register_durable_sink(
    sink: Callable[[RunChange], None], *, batch: Callable[[Sequence[RunChange]], None] | None = None
) -> None:
    """``batch``, when given, takes all the changes of one :func:`notify_many_on_commit` at once
    (same effect as ``sink`` on each, in order, with less work per change)."""
    if sink not in _durable:
        _durable.append(sink)
    if batch is not None:
        _durable_batch[sink] = batch


def register_listener(listener: Callable[[RunChange], None]) -> None:
    if listener not in _listeners:
        _listeners.append(listener)


def unregister_listener(listener: Callable[[RunChange], None]) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def replace_listeners(listener: Callable[[RunChange], None]) -> list[Callable[[RunChange], None]]:
    """Make ``listener`` the only listener and return the ones it replaced (the OTLP worker of the
    embedded profile forwards its changes to its server, whose listeners then run them)."""
    replaced = list(_listeners)
    _listeners[:] = [listener]
    return replaced


def dispatch_listeners(change: RunChange) -> None:
    """Run the listeners (not the durable sinks) for a change another process committed."""
    for listener in list(_listeners):
        try:
            listener(change)
        except Exception:  # a broken listener must never undo or block a committed write
            log.exception("run change listener %r failed for %s", listener, change.run_id)


def _dispatch(change: RunChange) -> None:
    for sink in list(_durable):
        try:
            sink(change)
        except Exception:  # the database holds the events: a failed file write must not block them
            log.exception("durable sink %r failed for %s", sink, change.run_id)
    for listener in list(_listeners):
        try:
            listener(change)
        except Exception:  # a broken listener must never undo or block a committed write
            log.exception("run change listener %r failed for %s", listener, change.run_id)


def notify_on_commit(change: RunChange) -> None:
    transaction.on_commit(partial(_dispatch, change))


def _dispatch_many(changes: tuple[RunChange, ...]) -> None:
    for sink in list(_durable):
        batch = _durable_batch.get(sink)
        try:
            if batch is not None:
                batch(changes)
                continue
        except Exception:  # as in _dispatch: the database holds the events
            log.exception("durable sink %r failed for %d changes", batch, len(changes))
            continue
        for change in changes:
            try:
                sink(change)
            except Exception:
                log.exception("durable sink %r failed for %s", sink, change.run_id)
    for change in changes:
        for listener in list(_listeners):
            try:
                listener(change)
            except Exception:  # a broken listener must never undo or block a committed write
                log.exception("run change listener %r failed for %s", listener, change.run_id)


def notify_many_on_commit(changes: Sequence[RunChange]) -> None:
    """One commit's changes of many runs (OTLP ingest creating a run per trace): every durable
    sink first (a batch-capable one takes them all at once), then every listener, change by change."""
    if changes:
        transaction.on_commit(partial(_dispatch_many, tuple(changes)))


# Forks waiting for their step code: the executor (``runs.execution.replay.dispatch``) registers
# itself in ``RunsConfig.ready``, so the write path never imports the code that runs programs.
_fork_executors: list[Callable[[int], None]] = []


def register_fork_executor(executor: Callable[[int], None]) -> None:
    if executor not in _fork_executors:
        _fork_executors.append(executor)


def fork_pending_on_commit(fork_pk: int) -> None:
    """After the commit, hand the pending fork to the registered executor(s)."""
    for executor in list(_fork_executors):
        transaction.on_commit(partial(executor, fork_pk))


# The sender of notification deliveries (``runs.notifications.tasks``) registers itself in
# ``RunsConfig.ready``. It is called INSIDE the transaction that wrote the outbox rows: with the
# database task backend the task row commits (or rolls back) together with them.
_delivery_schedulers: list[Callable[..., None]] = []


def register_delivery_scheduler(scheduler: Callable[..., None]) -> None:
    if scheduler not in _delivery_schedulers:
        _delivery_schedulers.append(scheduler)


def schedule_deliveries(run_after: Any = None) -> None:
    """Have the sender look at the outbox (now, or at ``run_after``, an aware datetime)."""
    for scheduler in list(_delivery_schedulers):
        scheduler(run_after)
