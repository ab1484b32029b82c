"""Executions: a send runs off the request path, as a ``django.tasks`` task, and is recorded as a
run of the playground workflow.

Lifecycle: ``submit`` stores a *pending* execution and, once the surrounding transaction commits,
enqueues :func:`execution_task` (a task row with the database backend; ``manage.py worker``
processes run it, any number of them). The task *claims* the execution (a conditional update
naming its task row, so two tasks never run the same one), marks it *processing*, and streams.
It ends *completed*, *failed* (with a code in words and a message for people), *incomplete*
(``STREAM_CUT``: the stream ended without its final event; what arrived is shown and joins the
conversation only if the tester adopts it), or *cancelled* when someone presses Stop.

Stop: ``cancel`` marks the row at once. The call's :class:`~runs.providers.Stop` is set in this
process at once when the call runs here, and in any other process by the task's stop watch (one
look at the row every ``STOP_WATCH_SECONDS`` while the call runs) and by the streaming loop, which
finds the row no longer processing at its next flush. A set Stop shuts the call's connection and
refuses the SDK's retries, so no request reaches the provider after Stop. The task then ends the
run; an answer that had already arrived is recorded with its usage and cost on the cancelled
execution and in the run's ledger (a provider bills it).

Idempotency: a worker that dies mid-task loses its lease and the same task row runs again. It
finds the execution processing under its own claim: if its run was never started, no request
left, and the call is made now (resumed); otherwise the request may have reached the provider,
so it is never sent again: the execution and its run end ``failed`` with
``EXECUTION_INTERRUPTED`` and a reason in words.

Run recording: :mod:`playground.recording` (all through runs.actions).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from functools import partial
from typing import Any

from django.conf import settings
from django.db import OperationalError, transaction
from django.db.models import F
from django.tasks import TaskContext, task
from django.utils import timezone

from playground import live, operations
from playground.compose import Composition
from playground.keys import KeyUnreadable
from playground.models import Execution, ExecutionStatus, ModelEntry
from playground.recording import (  # noqa: F401 - STEP, WORKFLOW and the command lists are read from here too
    CANCELLED,
    STEP,
    WORKFLOW,
    RunRecorder,
    completion_commands,
    failure_commands,
    prompt_summary,
    run_title,
)
from runs import providers
from runs.actions import ActionError, budgets, do_commands
from runs.engine import commands as cmd
from runs.execution.stopwatch import StopWatch
from runs.models import Workspace
from runs.protocol.values import dumps
from runs.providers import pricing
from runs.providers.base import STREAM_CUT, ProviderError, ProviderResult
from runs.selectors import runs as run_selectors
from runs.selectors.prices import price_book

log = logging.getLogger(__name__)

FLUSH_SECONDS = 0.12
STOP_WATCH_SECONDS = 0.25  # how often a running call looks for a Stop pressed in another process
FLUSH_CHARS = 400


# --------------------------------------------------------------------------------------------
# Submitting


def submit(
    *,
    workspace: Workspace,
    user: Any,
    entry: ModelEntry,
    composition: Composition,
    compare_group: str = "",
    label: str = "",
    conversation_id: str = "",
    parent_run_id: str = "",
    prompt: dict[str, Any] | None = None,
) -> Execution:
    """Store a pending execution; it is dispatched once the surrounding transaction commits.
    ``prompt`` (``{"name", "version"}``: the opened prompt version it sends) goes into its flags."""
    execution = Execution.objects.create(
        workspace=workspace,
        user=user if getattr(user, "is_authenticated", False) else None,
        model=entry,
        provider_kind=entry.provider.kind,
        model_name=entry.model_id,
        operation_type=composition.flags.get("operation_type", "generic"),
        compare_group=compare_group,
        label=label,
        conversation_id=conversation_id,
        parent_run_id=parent_run_id,
        correlation_id=f"corr_{uuid.uuid4().hex}",
        request=dumps(composition.request),
        user_content=dumps(composition.user_content),
        flags={**composition.flags, "prompt": prompt} if prompt else composition.flags,
        notes=list(composition.notes),
        output_tool=composition.output_tool or "",
        cache_keys=list(composition.cache_keys),
    )
    enqueue_on_commit(execution.pk)
    return execution


def resubmit(previous: Execution, *, user: Any) -> Execution:
    """A new pending execution with ``previous``'s exact request (Retry)."""
    execution = Execution.objects.create(
        workspace=previous.workspace,
        user=user if getattr(user, "is_authenticated", False) else None,
        model=previous.model,
        provider_kind=previous.provider_kind,
        model_name=previous.model_name,
        operation_type=previous.operation_type,
        compare_group=previous.compare_group,
        label=previous.label,
        conversation_id=previous.conversation_id,
        parent_run_id=previous.parent_run_id,
        correlation_id=f"corr_{uuid.uuid4().hex}",
        request=previous.request,
        user_content=previous.user_content,
        flags=previous.flags,
        notes=previous.notes,
        output_tool=previous.output_tool,
        cache_keys=previous.cache_keys,
    )
    enqueue_on_commit(execution.pk)
    return execution


NOT_QUEUED = "EXECUTION_NOT_QUEUED"


def enqueue_on_commit(execution_id: uuid.UUID) -> None:
    """Once the transaction that stored the execution commits, enqueue its task."""
    transaction.on_commit(partial(_enqueue, str(execution_id)))


def _enqueue(execution_id: str) -> None:
    try:
        execution_task.enqueue(execution_id)
    except Exception as exc:  # the task backend refused: say so instead of leaving it pending
        log.exception("playground: execution %s not queued", execution_id)
        message = f"The execution could not be queued for a worker ({type(exc).__name__}). Send it again."
        if Execution.objects.filter(pk=execution_id, status=ExecutionStatus.PENDING).update(
            status=ExecutionStatus.FAILED,
            error_code=NOT_QUEUED,
            error_message=message,
            finished_at=timezone.now(),
        ):
            live.notify_on_commit(uuid.UUID(execution_id), ExecutionStatus.FAILED)


@task(takes_context=True)
def execution_task(context: TaskContext, execution_id: str) -> str:
    """Run one playground execution (see the module's notes on idempotency): the claim names this
    task row, so a second row for the same execution does nothing and a re-run of this row after its
    worker died resumes the execution or ends it failed, never calling the provider twice."""
    return process(uuid.UUID(execution_id), claim_name(context))


def claim_name(context: TaskContext) -> str:
    return f"task:{context.task_result.id}"[:100]


# --------------------------------------------------------------------------------------------
# Processing


def claim(execution_id: uuid.UUID, worker_id: str) -> bool:
    now = timezone.now()
    claimed = bool(
        Execution.objects.filter(pk=execution_id, status=ExecutionStatus.PENDING).update(
            status=ExecutionStatus.PROCESSING, worker_id=worker_id, started_at=now, heartbeat_at=now
        )
    )
    if claimed:
        live.notify_on_commit(execution_id, ExecutionStatus.PROCESSING)
    return claimed


class Cancelled(Exception):
    """Raised inside the provider's stream when the execution was stopped: leaving the SDK's
    stream context closes the HTTP response, so the provider stops generating."""


INTERNAL_MESSAGE = "the playground failed while handling this call (the details are in the server log)"

# The Stop of every call this process is making, by execution id.
_stops: dict[uuid.UUID, providers.Stop] = {}
_stops_lock = threading.Lock()


def _hold_stop(execution_id: uuid.UUID) -> providers.Stop:
    with _stops_lock:
        return _stops.setdefault(execution_id, providers.Stop())


def _drop_stop(execution_id: uuid.UUID) -> None:
    with _stops_lock:
        _stops.pop(execution_id, None)


def signal_stop(execution_id: uuid.UUID) -> bool:
    """Stop the call of ``execution_id`` if this process is making it (True then)."""
    with _stops_lock:
        stop = _stops.get(execution_id)
    if stop is None:
        return False
    stop.set()
    return True


def stop_grace() -> float:
    """How long Stop waits for the worker to end the run itself (it records a late answer first)."""
    return float(getattr(settings, "PLAYGROUND_STOP_GRACE_SECONDS", 2))


def cancel(execution: Execution, *, actor: str) -> bool:
    """Stop a pending or processing execution; False when it had already finished."""
    message = f"Stopped by {actor.removeprefix('user:')} before the answer was complete."
    fields = {
        "status": ExecutionStatus.CANCELLED,
        "error_code": CANCELLED,
        "error_message": message,
        "finished_at": timezone.now(),
        "response_text": F("partial_text"),
    }
    mine = Execution.objects.filter(pk=execution.pk)
    processing = bool(mine.filter(status=ExecutionStatus.PROCESSING).update(**fields))
    if not processing and not mine.filter(status=ExecutionStatus.PENDING).update(**fields):
        return False
    signal_stop(execution.pk)
    live.notify_on_commit(execution.pk, ExecutionStatus.CANCELLED)
    execution.refresh_from_db()
    if execution.run_id and not (processing and _run_ended_by_worker(execution)):
        _cancel_run(execution, message, actor)
    return True


def _run_ended_by_worker(execution: Execution) -> bool:
    """Wait (a little) for the worker holding ``execution`` to end its run itself."""
    deadline = time.monotonic() + stop_grace()
    while True:
        run = run_selectors.find_run(execution.workspace, execution.run_id)
        if run is None or run.status in ("completed", "failed", "cancelled"):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _cancel_run(execution: Execution, message: str, actor: str) -> None:
    try:
        do_commands(
            workspace=execution.workspace,
            run_id=execution.run_id,
            commands=[
                cmd.RecordError(message=message, code=CANCELLED, step_id=STEP),
                cmd.CompleteStep(STEP, ok=False, error={"message": message, "code": CANCELLED}),
                cmd.CancelRun(reason=message),
            ],
            actor=actor,
        )
    except ActionError as exc:  # already ended (the answer's last events won the race)
        log.info("playground: run %s of %s not cancelled: %s", execution.run_id, execution.pk, exc)


class Streamer:
    """Collects deltas; every ~120 ms saves the partial answer (the page streams from it) and
    records the new pieces as stream_chunk events. Also the heartbeat while a call streams."""

    def __init__(self, execution: Execution, recorder: RunRecorder | None) -> None:
        self.execution = execution
        self.recorder = recorder
        self.text: list[str] = []
        self.thinking: list[str] = []
        self.offsets = {"text": 0, "thinking": 0, "tool_input": 0}
        self.pending: list[dict] = []
        self.pending_chars = 0
        self.last_flush = time.monotonic()

    def on_delta(self, kind: str, text: str) -> None:
        if not text:
            return
        if kind == "text":
            self.text.append(text)
        elif kind == "thinking":
            self.thinking.append(text)
        if self.pending and self.pending[-1]["kind"] == kind:
            self.pending[-1]["text"] += text
        else:
            self.pending.append({"kind": kind, "offset": self.offsets.get(kind, 0), "text": text})
        self.offsets[kind] = self.offsets.get(kind, 0) + len(text)
        self.pending_chars += len(text)
        if self.pending_chars >= FLUSH_CHARS or time.monotonic() - self.last_flush >= FLUSH_SECONDS:
            self.flush()

    def flush(self, *, final: bool = False) -> None:
        """Save the partial answer and record the pending pieces. A busy database (SQLite under
        concurrent writers) only delays this: the pieces stay pending for the next flush; the
        final flush retries for a while."""
        self.last_flush = time.monotonic()
        if not self.pending:
            return
        attempts = 50 if final else 1
        for attempt in range(attempts):
            try:
                self._write()
                return
            except OperationalError as exc:
                if attempt == attempts - 1:
                    if final:
                        raise
                    log.info("playground: flush of %s delayed: %s", self.execution.pk, exc)
                    return
                time.sleep(0.1)

    def _write(self) -> None:
        with transaction.atomic():
            still_running = Execution.objects.filter(
                pk=self.execution.pk, status=ExecutionStatus.PROCESSING
            ).update(
                partial_text="".join(self.text),
                partial_thinking="".join(self.thinking),
                heartbeat_at=timezone.now(),
            )
            if not still_running:  # stopped (or failed by recovery) meanwhile
                raise Cancelled()
            live.notify_on_commit(self.execution.pk, ExecutionStatus.PROCESSING)
            if self.recorder is not None:
                try:
                    self.recorder.chunks(self.pending)
                except ActionError as exc:  # the run was cancelled meanwhile: keep answering the page
                    log.warning("playground: stream chunks not recorded for %s: %s", self.execution.pk, exc)
                    self.recorder = None
        self.pending, self.pending_chars = [], 0


def _finish(execution_id: uuid.UUID, worker_id: str, **fields: Any) -> bool:
    """Write the final state unless recovery already failed this execution."""
    fields["finished_at"] = timezone.now()
    finished = bool(
        Execution.objects.filter(
            pk=execution_id, status=ExecutionStatus.PROCESSING, worker_id=worker_id
        ).update(**fields)
    )
    if finished:
        live.notify_on_commit(execution_id, fields.get("status", ""))
    return finished


def process(execution_id: uuid.UUID, worker_id: str) -> str:
    """Claim and run one execution to its end; returns its status. Nothing is done when another
    claim holds it or it has ended. Held by this very claim (``worker_id``: the task row), it is a
    re-run after the worker died: resumed when no request can have left, else ended failed."""
    if not claim(execution_id, worker_id) and not _resumable(execution_id, worker_id):
        return _status(execution_id)
    stop = _hold_stop(execution_id)
    try:
        watch = StopWatch(
            partial(_was_stopped, execution_id),
            stop,
            every=STOP_WATCH_SECONDS,
            name=f"stop-watch-{execution_id}",
        )
        with watch:
            _process(execution_id, worker_id, stop)
    finally:
        _drop_stop(execution_id)
    return _status(execution_id)


def _was_stopped(execution_id: uuid.UUID) -> bool:
    """Whether a Stop pressed in another process has ended the execution (its row says cancelled)."""
    return Execution.objects.filter(pk=execution_id, status=ExecutionStatus.CANCELLED).exists()


def _status(execution_id: uuid.UUID) -> str:
    return Execution.objects.filter(pk=execution_id).values_list("status", flat=True).first() or ""


def _process(execution_id: uuid.UUID, worker_id: str, stop: providers.Stop) -> None:
    ex = Execution.objects.select_related("workspace", "user", "model__provider").get(pk=execution_id)
    started = time.monotonic()
    entry = ex.model
    request = ex.request_json
    wire = providers.wire_request(ex.provider_kind, request)
    recorder = RunRecorder(ex)
    result: ProviderResult | None = None
    try:
        if entry is None:
            raise ProviderError("NO_PROVIDER", "the model of this execution was removed from the catalogue")
        ex.currency = entry.currency
        problem = entry.provider.missing()
        if problem:
            raise ProviderError("NO_PROVIDER", problem)
        try:
            provider_settings = entry.provider.provider_settings()
        except KeyUnreadable as exc:
            raise ProviderError("NO_PROVIDER", str(exc)) from None
        secrets = tuple(s for s in (provider_settings.api_key,) if s)
        with transaction.atomic():  # the run and the execution's link to it commit together
            run_id = recorder.start(wire, secrets)
            Execution.objects.filter(pk=ex.pk).update(run_id=run_id, currency=ex.currency)
        ex.run_id = run_id
        if not Execution.objects.filter(pk=ex.pk, status=ExecutionStatus.PROCESSING).exists():
            raise Cancelled()  # stopped before its run existed: cancel the run just started
        try:  # the run's budget (the playground workflow's, else the default): refused before the call
            budgets.refuse_over_run_budget(
                workspace=ex.workspace, run_id=run_id, what="this playground send", actor=recorder.actor
            )
        except ActionError as exc:
            raise ProviderError(exc.code, exc.message) from None
        streamer = Streamer(ex, recorder)
        result = providers.call(provider_settings, request, streamer.on_delta, stop=stop)
        streamer.flush(final=True)
    except (Cancelled, providers.StopRequested):
        # Stopped. ``result`` is set when the whole answer had arrived first: it is billed.
        _stopped(ex, result, entry, started)
        return
    except ProviderError as err:
        _fail(ex, worker_id, recorder, err, started, entry)
        return
    except Exception:  # an unexpected bug must still end the execution (its text stays in the log)
        log.exception("playground execution %s crashed", execution_id)
        _fail(ex, worker_id, recorder, ProviderError("INTERNAL_ERROR", INTERNAL_MESSAGE), started, entry)
        return
    duration_ms = int((time.monotonic() - started) * 1000)
    outcome = operations.check(ex.operation_type, result, ex.output_tool or None)
    priced = _cost(ex, result, entry)
    amount = priced.amount if priced is not None else None
    try:
        recorder.complete(result, outcome, priced, duration_ms)
    except ActionError as exc:
        log.warning("playground: response of %s not recorded in run %s: %s", ex.pk, ex.run_id, exc)
    common = {
        "partial_text": result.text,
        "partial_thinking": result.thinking,
        "content": dumps(result.content),
        "response_text": result.text,
        "thinking": result.thinking,
        "citations": result.citations,
        "tool_calls": [c for c in result.tool_calls if c["name"] != ex.output_tool],
        "structured_output": outcome.value if operations.get(ex.operation_type).structured else None,
        "usage": result.usage.to_json() if result.usage is not None else {},
        "cost": amount,
        "currency": priced.currency if priced is not None else entry.currency,
        "stop_reason": result.stop_reason or "",
        "duration_ms": duration_ms,
    }
    if outcome.ok:
        _finish(ex.pk, worker_id, status=ExecutionStatus.COMPLETED, **common)
    else:
        _finish(
            ex.pk,
            worker_id,
            status=ExecutionStatus.FAILED,
            error_code="STRUCTURED_OUTPUT_INVALID",
            error_message=f"The answer does not match the {ex.operation_type} schema: {outcome.error}",
            structured_error=dumps({"error": outcome.error, "path": outcome.error_path, "raw": outcome.raw}),
            **common,
        )


def _cost(ex: Execution, result: ProviderResult, entry: ModelEntry | None) -> pricing.PricedCall | None:
    """The priced call: unknown (None) when its usage or a price it needs is unknown. One price
    source: the workspace's own price for the model, else genai-prices, else the catalogue."""
    if result.usage is None or entry is None:
        return None
    return price_book(ex.workspace).price(provider=entry.kind, model=entry.model_id, usage=result.usage)


def _stopped(ex: Execution, result: ProviderResult | None, entry: ModelEntry | None, started: float) -> None:
    """The worker's side of a Stop: ``cancel`` already wrote the execution; the run ends
    cancelled here (cancel may have run before the run existed, and waits for this). An answer
    that arrived whole before the Stop took effect is recorded with its usage and cost."""
    ex.refresh_from_db()
    log.info("playground: execution %s stopped (%s)", ex.pk, ex.status)
    if ex.status != ExecutionStatus.CANCELLED:
        return
    if result is None:
        if ex.run_id:
            _cancel_run(ex, ex.error_message, "playground")
        return
    duration_ms = int((time.monotonic() - started) * 1000)
    priced = _cost(ex, result, entry)
    Execution.objects.filter(pk=ex.pk, status=ExecutionStatus.CANCELLED).update(
        usage=result.usage.to_json() if result.usage is not None else {},
        cost=priced.amount if priced is not None else None,
        currency=priced.currency
        if priced is not None
        else (entry.currency if entry is not None else ex.currency),
        stop_reason=result.stop_reason or "",
        duration_ms=duration_ms,
    )
    live.notify_on_commit(ex.pk, ExecutionStatus.CANCELLED)
    if ex.run_id:
        try:
            RunRecorder(ex).late_answer(result, priced, duration_ms, ex.error_message)
        except ActionError as exc:  # Stop ended the run itself (the grace ran out)
            log.warning("playground: late answer of %s not in run %s: %s", ex.pk, ex.run_id, exc)


def _fail(
    ex: Execution,
    worker_id: str,
    recorder: RunRecorder,
    err: ProviderError,
    started: float,
    entry: ModelEntry | None = None,
) -> None:
    """End the execution failed, or incomplete when the stream was cut (its partial answer is
    kept apart: shown, and in the conversation only if the tester adopts it)."""
    partial = err.partial if err.code == STREAM_CUT else None
    if recorder.run_id:
        try:
            recorder.fail(err.code, err.message, partial)
        except ActionError as exc:
            log.warning("playground: failure of %s not recorded: %s", ex.pk, exc)
    so_far = Execution.objects.filter(pk=ex.pk).values_list("partial_text", flat=True).first() or ""
    fields: dict[str, Any] = {}
    if partial is not None:
        fields = {
            "partial_text": partial.text,
            "partial_thinking": partial.thinking,
            "content": dumps(partial.content),
            "thinking": partial.thinking,
            "currency": entry.currency if entry is not None else "",
        }
    _finish(
        ex.pk,
        worker_id,
        status=ExecutionStatus.INCOMPLETE if partial is not None else ExecutionStatus.FAILED,
        error_code=err.code,
        error_message=err.message,
        error_status=err.status,
        provider_error_type=err.provider_type or "",
        response_text=partial.text if partial is not None else so_far,
        duration_ms=int((time.monotonic() - started) * 1000),
        **fields,
    )


# --------------------------------------------------------------------------------------------
# A task run again after its worker died


INTERRUPTED = "EXECUTION_INTERRUPTED"
INTERRUPTED_MESSAGE = (
    "The worker running this execution stopped (crash or restart) while the provider was answering. "
    "It is not sent again by itself (the provider may have received it): send it again."
)


def _resumable(execution_id: uuid.UUID, worker_id: str) -> bool:
    """The execution is processing under ``worker_id``: this task ran before and its worker died.
    True (resume) when its run was never started: the run is started, with the request recorded,
    before the request is sent, in one transaction with the execution's link to it. Otherwise
    the execution and its run end failed with the reason, and False."""
    ex = (
        Execution.objects.select_related("workspace")
        .filter(pk=execution_id, status=ExecutionStatus.PROCESSING, worker_id=worker_id)
        .first()
    )
    if ex is None:
        return False
    if not ex.run_id:
        log.info("playground: execution %s resumed (its worker stopped before the call)", ex.pk)
        return True
    interrupt(ex)
    return False


def interrupt(ex: Execution) -> bool:
    """End a processing execution failed with ``EXECUTION_INTERRUPTED``, and its run."""
    updated = Execution.objects.filter(
        pk=ex.pk, status=ExecutionStatus.PROCESSING, worker_id=ex.worker_id
    ).update(
        status=ExecutionStatus.FAILED,
        error_code=INTERRUPTED,
        error_message=INTERRUPTED_MESSAGE,
        finished_at=timezone.now(),
        response_text=F("partial_text"),
    )
    if not updated:
        return False
    live.notify_on_commit(ex.pk, ExecutionStatus.FAILED)
    if ex.run_id:
        try:
            do_commands(
                workspace=ex.workspace,
                run_id=ex.run_id,
                commands=[
                    cmd.RecordError(message=INTERRUPTED_MESSAGE, code=INTERRUPTED, step_id=STEP),
                    cmd.FailRun(reason=INTERRUPTED_MESSAGE, code=INTERRUPTED),
                ],
                actor="playground",
            )
        except ActionError as exc:  # the run had ended (its answer was recorded before the crash)
            log.warning("playground: interrupted run %s not updated: %s", ex.run_id, exc)
    return True
