"""Waiting for a gate's decision over the network: ``GET /api/runs/{id}/gates/wait``.

A long poll: the request is answered as soon as a reviewer decides the gate (or the run ends),
else after ``timeout`` seconds with ``status: "pending"`` (the client asks again; it never polls
on an interval of its own). The view is async, so a waiting request holds no worker thread: it
sleeps on an :class:`asyncio.Event` that a listener of ``runs.actions.notify`` sets after any
commit to the run in this process, and looks at the database every ``GATE_WAIT_POLL_SECONDS``
besides (decisions taken in another server process of the scaled profile).

The answer: ``{status: decided|pending|closed, runId, stepId, gate, checkpoint, afterSeq,
decision, note, edits, by, at, seq}``; ``afterSeq`` is the seq of the gate's request (what
``POST /events`` answered for it): only a decision after it counts.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest
from ninja import Query, Router, Schema
from pydantic import Field

from runs.actions.notify import RunChange, register_listener
from runs.actions.permissions import Action
from runs.api.errors import ApiError
from runs.api.responses import readable_run, require
from runs.api.schemas import ErrorOut, Gate
from runs.protocol.errors import ErrorCode
from runs.selectors.gates import gate_decision

router = Router(tags=["gates"])

MAX_WAIT_SECONDS = 60.0
DEFAULT_WAIT_SECONDS = 25.0


class WaitQuery(Schema):
    # Required in fact; checked after the run is found, so that an outsider gets 404 either way.
    stepId: str | None = Field(default=None, max_length=200, description="Required.")
    gate: Gate | None = Field(default=None, description="Required.")
    checkpoint: str | None = Field(default=None, min_length=1, max_length=200)
    afterSeq: int | None = Field(
        default=None, ge=0, description="Required: the seq of the gate's request; decisions after it count."
    )
    timeout: float = Field(default=DEFAULT_WAIT_SECONDS, ge=0, le=MAX_WAIT_SECONDS)


class EditOut(Schema):
    artifactKey: str
    typeId: str | None = None
    version: int
    data: Any = None


class DecisionOut(Schema):
    status: str = Field(
        description="decided, pending (the wait timed out: ask again) or closed (the run ended)."
    )
    runId: str
    stepId: str
    gate: str
    checkpoint: str | None
    afterSeq: int
    decision: str | None = None
    note: str | None = None
    edits: list[EditOut] = []
    by: str | None = None
    at: str | None = None
    seq: int | None = None


ERRORS = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 429: ErrorOut}


# ---------------------------------------------------------------------------------------------
# Waiters of this process, woken after a commit to their run (the listener runs in the writer's
# thread: it only schedules a wake-up in each waiter's event loop).

_waiters: dict[int, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}
_lock = threading.Lock()
_registered = False


def _on_change(change: RunChange) -> None:
    with _lock:
        waiting = list(_waiters.get(change.run_pk, ()))
    for loop, event in waiting:
        try:
            loop.call_soon_threadsafe(event.set)
        except RuntimeError:  # the waiter's loop has closed
            pass


def _listen(run_pk: int) -> tuple[asyncio.AbstractEventLoop, asyncio.Event]:
    global _registered
    if not _registered:
        register_listener(_on_change)
        _registered = True
    waiter = (asyncio.get_running_loop(), asyncio.Event())
    with _lock:
        _waiters.setdefault(run_pk, set()).add(waiter)
    return waiter


def _unlisten(run_pk: int, waiter: tuple[asyncio.AbstractEventLoop, asyncio.Event]) -> None:
    with _lock:
        waiting = _waiters.get(run_pk)
        if waiting is not None:
            waiting.discard(waiter)
            if not waiting:
                del _waiters[run_pk]


def poll_seconds() -> float:
    return float(getattr(settings, "GATE_WAIT_POLL_SECONDS", 1.0))


# ---------------------------------------------------------------------------------------------


def _look(request: HttpRequest, run_id: str, query: WaitQuery) -> tuple[int, dict[str, Any]]:
    """(the run's pk, the answer so far): decided, closed, or pending."""
    caller = require(request, Action.VIEW_RUN)
    run = readable_run(caller, run_id)
    step_id, gate, after_seq = query.stepId, query.gate, query.afterSeq
    if not step_id or gate is None or after_seq is None:
        given = {"stepId": step_id, "gate": gate, "afterSeq": after_seq}
        missing = [name for name, value in given.items() if value in (None, "")]
        raise ApiError(ErrorCode.INVALID_INPUT, f"missing query parameter(s): {', '.join(missing)}")
    if query.checkpoint is not None and gate != "CHECKPOINT":
        raise ApiError(ErrorCode.INVALID_INPUT, "only CHECKPOINT gates are named")
    if after_seq > run.last_seq:
        raise ApiError(ErrorCode.INVALID_INPUT, f"afterSeq {after_seq} is beyond the run's last seq")
    base = {
        "runId": run.run_id,
        "stepId": step_id,
        "gate": gate,
        "checkpoint": query.checkpoint,
        "afterSeq": after_seq,
    }
    decided = gate_decision(run, step_id=step_id, gate=gate, checkpoint=query.checkpoint, after_seq=after_seq)
    if decided is not None:
        return run.pk, {**base, "status": "decided", **decided}
    if run.is_finished:
        return run.pk, {**base, "status": "closed", "note": f"the run is {run.status}"}
    return run.pk, {**base, "status": "pending"}


look = sync_to_async(_look)


@router.get(
    "/{runid:run_id}/gates/wait",
    response={200: DecisionOut, **ERRORS},
    summary="Wait for a gate's decision (long poll)",
)
async def wait_for_decision(request: HttpRequest, run_id: str, query: Query[WaitQuery]):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + query.timeout
    run_pk, answer = await look(request, run_id, query)
    if answer["status"] != "pending" or query.timeout == 0:
        return answer
    waiter = _listen(run_pk)
    try:
        while True:
            left = deadline - loop.time()
            if left <= 0:
                return answer
            try:
                await asyncio.wait_for(waiter[1].wait(), timeout=min(left, poll_seconds()))
            except TimeoutError:
                pass
            waiter[1].clear()
            _, answer = await look(request, run_id, query)
            if answer["status"] != "pending":
                return answer
    finally:
        _unlisten(run_pk, waiter)
