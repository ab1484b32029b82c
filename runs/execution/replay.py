"""Executing step code: live runs of registered programs, and the replay worker for forks.

A program drives a run through a :class:`ProgramSession`: the in-process session API plus
``model_call`` (through the provider layer and the response cache) and ``gate_decision``.

A fork is re-executed by running its workflow's program *from the start* against a
:class:`ForkSession`. While the program is still inside the fork's fixed history (the source's
events ``< fromSeq``, already copied), every command is matched with the next history event
instead of being appended, and model calls and gate decisions take their recorded outcome (no
provider request). From ``fromSeq`` on, commands append for real:

* replay: model calls are answered from the response cache (the source's answer to the same
  request); a request that equals the source's but whose answer is gone fails the replay with
  ``REPLAY_DATA_EXPIRED`` instead of asking the provider again; a request that differs (new
  prompt, new code) goes to the provider. Gate decisions are the source's recorded ones.
  Every appended event is compared with the source's by the write path (divergences).
* branch: model calls go to the provider (new invocations), gate decisions come from the
  overlay's ``gateDecisions`` (else the source's), ``configurable`` reaches the program.

A pending fork runs as a ``django.tasks`` task (:func:`fork_task`), enqueued once the fork is
committed (and again when a reviewer's decision resumes a fork waiting at a gate); ``manage.py
worker`` processes run it. Idempotent: the fork is claimed by its task row; when a worker dies
mid-replay the same row runs again and re-executes the program from the start against everything
the fork already recorded, which is matched, not appended (no event twice), and model calls inside
it take their recorded answers (no second provider call). A fork whose worker died
``MAX_ATTEMPTS`` times ends failed with the reason in words.

Cancel: a fork is a run, cancelled like any (the run page's Cancel, ``POST
/api/runs/{id}/cancel``, an experiment's Cancel). Before every call that could reach a provider
the fork reads its run's status, and while the program runs a watch looks at it every
``CANCEL_WATCH_SECONDS`` and sets the call's :class:`~runs.providers.Stop` (the call under way is
shut, the SDK's retries refused): no request reaches a provider after Cancel. The fork then ends
``failed`` with code ``CANCELLED`` and "cancelled by <who>".
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

from django.db.models import F, Q
from django.tasks import TaskContext, task
from django.utils import timezone

from runs import actions
from runs.actions import ActionError, AppendResult, budgets, responsecache
from runs.actions.core import engine_context, load_state
from runs.actions.forks import REPLAY_DATA_EXPIRED
from runs.actions.notify import RunChange
from runs.engine import commands as cmd
from runs.engine import programs
from runs.engine.decide import decide
from runs.engine.divergence import is_marker
from runs.engine.errors import EngineError
from runs.engine.fold import apply_event, fold
from runs.engine.state import initial_run_doc
from runs.execution import model_calls as cached
from runs.execution import prompts as program_prompts
from runs.execution.session import RunSession
from runs.execution.stopwatch import StopWatch
from runs.models import Event, ForkMode, ForkStatus, Run, RunFork, RunStatus, Workspace
from runs.protocol.values import loads
from runs.providers import Stop, StopRequested


class Host(Protocol):
    """Who runs a program: a workspace and an actor (``runs.execution.host.Workbench`` is one;
    this module never imports it, so the host API and the executor form no circle)."""

    workspace: Workspace
    actor: str


log = logging.getLogger(__name__)


class GateWaiting(Exception):  # noqa: N818 (a state the fork stops in, not an error)
    """The step code reached a gate that nobody decided: the fork stops there, waiting, like its
    source would. A reviewer's decision on the fork resumes it (:func:`resume_waiting_forks`)."""

    def __init__(self, step_id: str, gate: str, checkpoint: str | None) -> None:
        super().__init__(f"{gate} of {step_id!r} waits for a reviewer")
        self.step_id = step_id
        self.gate = gate
        self.checkpoint = checkpoint


class ForkCancelled(Exception):  # noqa: N818 (a state the fork ends in)
    """The fork's run was cancelled: nothing more is appended or asked of a provider."""


class ReplayError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _model_io_command(fields: dict, *, step_id: str | None, correlation_id: str | None) -> cmd.LogModelIO:
    return cmd.LogModelIO(
        direction=fields["direction"],
        provider=fields.get("provider"),
        model=fields.get("model"),
        usage=fields.get("usage"),
        cost=fields.get("cost"),
        duration_ms=fields.get("durationMs"),
        summary=fields.get("summary"),
        payload=fields.get("payload"),
        step_id=step_id,
        correlation_id=correlation_id,
    )


class ProgramSession(RunSession):
    """What step code gets: the session API, model calls through the cache, gate decisions."""

    mode: str | None = None

    def __init__(
        self, workspace: Workspace, actor: str, run_id: str, *, configurable: dict | None = None
    ) -> None:
        super().__init__(workspace, actor, run_id)
        self.configurable: dict = dict(configurable or {})

    def execute_many(self, commands: list[Any]) -> AppendResult:
        return actions.do_commands(
            workspace=self.workspace,
            run_id=self.run_id,
            commands=commands,
            actor=self.actor,
        )

    # model calls -------------------------------------------------------------------------------

    def model_call(
        self,
        provider: Any,
        request: dict,
        *,
        step_id: str | None = None,
        correlation_id: str | None = None,
        summary: str | None = None,
        use_cache: bool = False,
        prompt: program_prompts.ProgramPrompt | None = None,
        **options: Any,
    ):
        """Call a model (``provider``: playground ProviderSettings) and record request and
        response as ``model_io`` events. Live runs ask the cache only with ``use_cache``.
        ``prompt`` (from :meth:`prompt`): the response records its name and version.
        ``options`` go to ``runs.execution.model_calls.call`` (``record_chunks``,
        ``on_delta``). Before a call that would reach the provider, the run's budget is checked:
        a live run cannot wait at a gate here, so one that would pass it is refused
        (``BUDGET_EXCEEDED``, in the budget trail) and nothing is called."""

        self._refuse_over_budget(provider, request, summary, use_cache)
        record = cached.call(
            provider,
            request,
            workspace=self.workspace,
            use_cache=use_cache,
            summary=summary,
            **options,
        )
        self._record_call(record, step_id=step_id, correlation_id=correlation_id, prompt=prompt)
        return record.result

    def _refuse_over_budget(self, provider: Any, request: dict, summary: str | None, use_cache: bool) -> None:
        if use_cache:
            recorded = cached.request_fields(provider, request, summary=summary)
            keys = responsecache.request_keys(provider.kind, recorded.get("model"), recorded["payload"])
            if keys is not None and responsecache.lookup(self.workspace, keys["v2"]) is not None:
                return  # answered from the cache: no provider request, no spend
        budgets.refuse_over_run_budget(
            workspace=self.workspace, run_id=self.run_id, what="this model call", actor=self.actor
        )

    def prompt(
        self, name: str, *, label: str | None = None, version: int | None = None
    ) -> program_prompts.ProgramPrompt | None:
        """Prompt ``name`` by label (``production`` by default) or number; in a fork of an
        experiment that changes this prompt, the version the experiment names. None: no such
        prompt (the program uses its own text)."""
        return program_prompts.resolve(self.workspace, self.configurable, name, label=label, version=version)

    def _record_call(
        self,
        record: Any,
        *,
        step_id: str | None,
        correlation_id: str | None,
        prompt: program_prompts.ProgramPrompt | None = None,
    ) -> None:
        self.execute(_model_io_command(record.request, step_id=step_id, correlation_id=correlation_id))
        for chunk in record.chunks:
            self.execute(_model_io_command(chunk, step_id=step_id, correlation_id=correlation_id))
        # A new answer is priced like every recorded call (the price book: the workspace's own
        # prices, else genai-prices); one answered from the cache keeps the cost it was recorded with.
        response = program_prompts.stamp(self.priced(record.response), prompt)
        self.execute(_model_io_command(response, step_id=step_id, correlation_id=correlation_id))

    # gates -------------------------------------------------------------------------------------

    def gate_decision(
        self,
        step_id: str,
        gate: str,
        proposed: str = "approved",
        *,
        note: str | None = None,
        checkpoint: str | None = None,
    ) -> str:
        """Resolve a requested gate and return the decision that was recorded."""
        decision, note, actor = self._choose_decision(step_id, gate, proposed, note, checkpoint)
        result = self.resolve_gate(step_id, gate, decision, note=note, checkpoint=checkpoint, actor=actor)
        for event in reversed(result.events):
            if event["type"] == "human_gate_resolved" and event.get("stepId") == step_id:
                return event["decision"]
        return decision

    def _choose_decision(
        self, step_id: str, gate: str, proposed: str, note: str | None, checkpoint: str | None
    ) -> tuple[str, str | None, str | None]:
        """(decision, note, actor): the program's own step code decides in a live run."""
        return proposed, note, None


class ForkSession(ProgramSession):
    """A program re-executing a fork: history first (matched, not appended), then for real."""

    def __init__(self, workspace: Workspace, actor: str, fork: RunFork) -> None:
        overlay = fork.overlay or {}
        super().__init__(
            workspace,
            actor,
            fork.run.run_id,
            configurable=overlay.get("configurable") if fork.mode == ForkMode.BRANCH else None,
        )
        self.fork = fork
        self.mode = fork.mode
        # The fixed history, then (when a fork resumes after a reviewer decided at the gate it
        # stopped at) its own events since: re-executed from the start, matched, not appended.
        history = [
            loads(body)
            for body in Event.objects.filter(run=fork.run).order_by("seq").values_list("body", flat=True)
        ]
        self.history: list[dict] = history[: fork.history] + [
            e for e in history[fork.history :] if not is_marker(e)
        ]
        start = initial_run_doc(fork.run.run_doc)
        self.shadow = fold(start, [])
        self.position = 0  # source positions consumed (history) or produced (after it)
        self.ctx = engine_context()
        self.stop = Stop()  # set by Cancel (the run's status): see the StopWatch in run_fork

    def check_cancelled(self) -> None:
        """Raise :class:`ForkCancelled` once the fork's run was cancelled."""
        if self.stop.is_set() or run_was_cancelled(self.fork.run_id):
            self.stop.set()
            raise ForkCancelled()

    @property
    def in_history(self) -> bool:
        return self.position < len(self.history)

    def _source_event_and_actor(self, position: int) -> tuple[dict | None, str]:
        """The source's event at ``position`` and who appended it (the person who decided)."""
        if self.fork.source_id is None:
            return None, ""
        row = (
            Event.objects.filter(run_id=self.fork.source_id, seq=position)
            .values_list("body", "actor")
            .first()
        )
        return (loads(row[0]), row[1]) if row is not None else (None, "")

    def _source_event(self, position: int) -> dict | None:
        if self.fork.source_id is None:
            return None
        body = (
            Event.objects.filter(run_id=self.fork.source_id, seq=position)
            .values_list("body", flat=True)
            .first()
        )
        return loads(body) if body is not None else None

    def execute(self, command: Any, *, actor: str | None = None) -> AppendResult:
        if not self.in_history:
            result = super().execute(command, actor=actor)
            self.position += sum(1 for e in result.events if not is_marker(e))
            return result
        try:
            planned = decide(self.shadow, command, self.ctx)
        except (EngineError, Exception) as exc:  # the command no longer fits the recorded history
            raise ReplayError(
                "REPLAY_HISTORY_MISMATCH",
                f"the step code does not reproduce the fixed history at seq {self.position + 1}: {exc}",
            ) from exc
        taken: list[dict] = []
        while planned and self.in_history:
            planned.pop(0)
            event = self.history[self.position]
            apply_event(self.shadow, event)
            taken.append(event)
            self.position += 1
        if not planned:
            return AppendResult(run=None, state=self.shadow, events=taken)  # type: ignore[arg-type]
        # The command straddles the fork point: what it adds beyond the history is appended.
        tail = [{**e, "runId": self.run_id} for e in planned]
        result = actions.do_append_events(
            workspace=self.workspace,
            run_id=self.run_id,
            events=tail,
            actor=actor or self.actor,
        )
        self.position += sum(1 for e in result.events if not is_marker(e))
        return AppendResult(run=result.run, state=result.state, events=taken + result.events)

    # model calls -------------------------------------------------------------------------------

    def model_call(
        self,
        provider: Any,
        request: dict,
        *,
        step_id: str | None = None,
        correlation_id: str | None = None,
        summary: str | None = None,
        use_cache: bool = False,
        prompt: program_prompts.ProgramPrompt | None = None,
        **options: Any,
    ):
        self._take_budget_gates()
        if self.in_history:
            return self._call_from_history(provider, request, step_id, correlation_id, summary, options)
        self._check_budget(provider, request, summary, step_id)
        record = self._call_after_history(provider, request, summary, options)
        self._record_call(record, step_id=step_id, correlation_id=correlation_id, prompt=prompt)
        return record.result

    # run budgets -------------------------------------------------------------------------------

    def _take_budget_gates(self) -> None:
        """The ``budget`` gate this call paused at before (the fork re-executes from the start
        once a person decided): its request and resolution are taken from the history, not asked
        again. A stop there ends the fork with BUDGET_EXCEEDED."""
        while self.in_history and _budget_gate_event(self.history[self.position]):
            event = self.history[self.position]
            apply_event(self.shadow, event)
            self.position += 1
            if event["type"] == "human_gate_resolved" and event.get("decision") != "approved":
                raise ReplayError(
                    budgets.BUDGET_EXCEEDED, f"stopped at its budget ({event.get('note') or 'rejected'})"
                )

    def _check_budget(self, provider: Any, request: dict, summary: str | None, step_id: str | None) -> None:
        """Before a call that asks the provider (a branch's; a replay's cache miss): a fork whose
        spend would pass its run budget pauses at its ``budget`` gate and calls nothing; a person
        raising the limit resumes it (:func:`resume_waiting_forks`)."""
        if self.mode == ForkMode.REPLAY:
            recorded = cached.request_fields(provider, request, summary=summary)
            keys = responsecache.request_keys(provider.kind, recorded.get("model"), recorded["payload"])
            if keys is not None and responsecache.lookup(self.workspace, keys["v2"]) is not None:
                return  # answered from the cache: no provider request, no spend
        answer = budgets.check_run_budget(
            workspace=self.workspace,
            run_id=self.run_id,
            step_id=step_id,
            actor=self.actor,
            self_reported=False,
        )
        if answer["allowed"]:
            return
        gate = answer.get("gate")
        if gate is None:  # the call names no step to pause at: refused, recorded in the trail
            raise ReplayError(budgets.BUDGET_EXCEEDED, answer["message"])
        raise GateWaiting(gate["stepId"], budgets.CHECKPOINT, budgets.BUDGET_CHECKPOINT)

    def _call_after_history(self, provider: Any, request: dict, summary: str | None, options: dict):
        """A replay answers from the cache, a branch makes a new invocation; both are counted.
        Nothing is asked once the run was cancelled (and a call under way is stopped)."""

        self.check_cancelled()
        options = {**options, "stop": self.stop}
        if self.mode == ForkMode.REPLAY:
            record = self._replay_call(provider, request, summary, options)
        else:
            record = cached.call(
                provider,
                request,
                workspace=self.workspace,
                use_cache=False,
                summary=summary,
                **options,
            )
        counter = "cache_hits" if record.hit else "provider_calls"
        RunFork.objects.filter(pk=self.fork.pk).update(**{counter: F(counter) + 1})
        return record

    def _replay_call(self, provider: Any, request: dict, summary: str | None, options: dict):

        recorded = cached.request_fields(provider, request, summary=summary)
        keys = responsecache.request_keys(provider.kind, recorded.get("model"), recorded["payload"])
        if keys is not None and responsecache.lookup(self.workspace, keys["v2"]) is None:
            original = self._source_event(self.position + 1)
            if original and original.get("type") == "model_io" and original.get("direction") == "request":
                if "payload" not in original:  # redacted: whether the request is the same is unknowable
                    raise ReplayError(
                        REPLAY_DATA_EXPIRED,
                        f"the source's model call at seq {self.position + 1} was redacted and no cached answer "
                        "to this request remains; a replay does not ask the provider again",
                    )
                if responsecache.event_keys(original) == keys:
                    raise ReplayError(
                        REPLAY_DATA_EXPIRED,
                        f"the source's answer to the model call at seq {self.position + 1} was deleted or "
                        "expired; a replay does not ask the provider again",
                    )
        return cached.call(
            provider,
            request,
            workspace=self.workspace,
            use_cache=True,
            prefer_run=self.fork.source,
            summary=summary,
            **options,
        )

    def _call_from_history(self, provider: Any, request: dict, step_id, correlation_id, summary, options):
        """Inside the fixed history: the recorded request, chunks and response are the call."""

        request_event = self.history[self.position]
        self.execute(
            _model_io_command(
                cached.request_fields(provider, request, summary=summary),
                step_id=step_id,
                correlation_id=correlation_id,
            )
        )
        if request_event.get("type") != "model_io" or request_event.get("direction") != "request":
            raise ReplayError("REPLAY_HISTORY_MISMATCH", f"no recorded model request at seq {self.position}")
        streamed = 0  # stream chunks of the call inside the history
        while self.in_history:
            event = self.history[self.position]
            if event.get("type") == "model_io" and event.get("direction") == "stream_chunk":
                streamed += 1
                self.execute(
                    _model_io_command(
                        responsecache.model_io_fields(event), step_id=step_id, correlation_id=correlation_id
                    )
                )
                continue
            break
        if self.in_history:
            response = self.history[self.position]
            self.execute(
                _model_io_command(
                    responsecache.model_io_fields(response), step_id=step_id, correlation_id=correlation_id
                )
            )
            return cached.result_from_recorded(provider.kind, response)
        # The response lies after the fork point: answer it as a replay or branch would; the
        # stream goes on after the chunks the history holds.
        record = self._call_after_history(provider, request, summary, options)
        for chunk in [*record.chunks[streamed:], record.response]:
            self.execute(_model_io_command(chunk, step_id=step_id, correlation_id=correlation_id))
        return record.result

    # gates -------------------------------------------------------------------------------------

    def _choose_decision(
        self, step_id: str, gate: str, proposed: str, note: str | None, checkpoint: str | None
    ) -> tuple[str, str | None, str | None]:
        """Only a decision a person made: never the step code's proposal (nothing decides for a
        person). Inside the history the recorded resolution is taken (``execute`` matches it);
        a branch takes the decision its creator named in ``gateDecisions``; a replay, and a branch
        for other gates, take the source's recorded decision at this position. Otherwise the fork
        stops here, waiting (:class:`GateWaiting`)."""
        if self.in_history:
            return proposed, note, None  # the recorded resolution is taken from the history
        if self.mode == ForkMode.BRANCH:
            chosen = (self.fork.overlay or {}).get("gateDecisions", {}).get(step_id)
            if chosen is not None:
                creator = self.fork.run.created_by or None  # who asked for the branch decided
                if isinstance(chosen, dict):
                    return chosen["decision"], chosen.get("note", note), creator
                return chosen, note, creator
        original, actor = self._source_event_and_actor(self.position + 1)
        if not self._same_gate(original, step_id, gate, checkpoint):
            # The replay's events moved (its step code changed): the source's decision on this very
            # gate, the same time it came up, is still a decision a person recorded.
            original, actor = self._source_resolution(step_id, gate, checkpoint)
        if original is not None:
            # A named checkpoint's resolution carries its name in `note` (the reference's
            # convention): the program's own arguments say it again, so only the decision is taken.
            return original["decision"], note if checkpoint else original.get("note"), actor or None
        raise GateWaiting(step_id, gate, checkpoint)

    @staticmethod
    def _same_gate(event: dict | None, step_id: str, gate: str, checkpoint: str | None) -> bool:
        if not event or event.get("type") != "human_gate_resolved":
            return False
        if event.get("stepId") != step_id or event.get("gate") != gate:
            return False
        if checkpoint is None:
            return True
        # a named checkpoint's resolution names it in `note` (the reference's convention) or in
        # `correlationId` ("checkpoint:<name>", this server's convention)
        return checkpoint in (
            event.get("note"),
            (event.get("correlationId") or "").removeprefix("checkpoint:"),
        )

    def _source_resolution(self, step_id: str, gate: str, checkpoint: str | None) -> tuple[dict | None, str]:
        """The source's n-th resolution of this gate, n counting this fork's own resolutions of it."""
        if self.fork.source_id is None:
            return None, ""
        mine = sum(1 for e in self._own_events() if self._same_gate(e, step_id, gate, checkpoint))
        rows = Event.objects.filter(run_id=self.fork.source_id, type="human_gate_resolved", step_id=step_id)
        seen = 0
        for body, actor in rows.order_by("seq").values_list("body", "actor"):
            event = loads(body)
            if self._same_gate(event, step_id, gate, checkpoint):
                if seen == mine:
                    return event, actor
                seen += 1
        return None, ""

    def _own_events(self) -> list[dict]:
        return [
            loads(body)
            for body in Event.objects.filter(run=self.fork.run, type="human_gate_resolved").values_list(
                "body", flat=True
            )
        ]


def _budget_gate_event(event: dict) -> bool:
    """A request or resolution of a run's ``budget`` checkpoint (runs.actions.budgets)."""
    return (
        event.get("type") in ("human_gate_requested", "human_gate_resolved")
        and event.get("gate") == budgets.CHECKPOINT
        and event.get("correlationId") == f"checkpoint:{budgets.BUDGET_CHECKPOINT}"
    )


# --------------------------------------------------------------------------------------------
# Running programs


def run_program(workbench: Host, *, workflow: dict, program: Any = None, **start: Any) -> ProgramSession:
    """Start a run of ``workflow`` and execute its program (registered or given) to its end."""
    program = program or programs.get(workflow["id"])
    if program is None:
        raise ActionError("INVALID_INPUT", f"no step code is registered for workflow {workflow['id']!r}")
    run = actions.do_start_run(
        workspace=workbench.workspace, workflow=workflow, actor=workbench.actor, **start
    )
    session = ProgramSession(workbench.workspace, workbench.actor, run.run_id)
    program(session)
    return session


def _fail_run(fork: RunFork, code: str, message: str) -> None:
    try:
        actions.do_commands(
            workspace=fork.run.workspace,
            run_id=fork.run.run_id,
            commands=[cmd.RecordError(message=message, code=code), cmd.FailRun(reason=message, code=code)],
            actor="replay",
        )
    except ActionError as exc:
        log.info("replay %s: failure not recorded: %s", fork.run.run_id, exc)


MAX_ATTEMPTS = 3
WORKER_LOST = "WORKER_LOST"
NOT_QUEUED = "NOT_QUEUED"
CANCELLED = "CANCELLED"
CANCEL_WATCH_SECONDS = 0.25


def run_was_cancelled(run_pk: int) -> bool:
    return Run.unscoped.filter(pk=run_pk, status=RunStatus.CANCELLED).exists()


def cancelled_by(fork: RunFork) -> str:
    """Who ended the fork's run (the actor of its last status change), in words."""
    actor = (
        Event.objects.filter(run_id=fork.run_id, type="run_status_changed")
        .order_by("-seq")
        .values_list("actor", flat=True)
        .first()
    )
    return (actor or "").removeprefix("user:") or "someone"


@task(takes_context=True)
def fork_task(context: TaskContext, fork_pk: int) -> str:
    """Re-execute one fork (see the module's notes on idempotency)."""
    fork = run_fork(fork_pk, task_id=str(context.task_result.id))
    return fork.status if fork is not None else "not claimed"


def run_fork(fork_pk: int, *, task_id: str = "") -> RunFork | None:
    """Claim a pending fork and re-execute it with its workflow's program. With ``task_id`` (the
    task), also a fork running under that same task row: its worker died, it resumes."""
    claim = Q(status=ForkStatus.PENDING)
    if task_id:
        claim |= Q(status=ForkStatus.RUNNING, task_id=task_id)
    if not RunFork.objects.filter(claim, pk=fork_pk).update(
        status=ForkStatus.RUNNING, started_at=timezone.now(), task_id=task_id, attempts=F("attempts") + 1
    ):
        return None
    fork = RunFork.objects.select_related("run", "run__workspace", "source").get(pk=fork_pk)
    if fork.attempts > MAX_ATTEMPTS:
        message = f"the worker re-executing this fork stopped {MAX_ATTEMPTS} times before it finished"
        _fail_run(fork, WORKER_LOST, message)
        RunFork.objects.filter(pk=fork_pk).update(
            status=ForkStatus.FAILED,
            error_code=WORKER_LOST,
            error_message=message,
            finished_at=timezone.now(),
        )
        fork.refresh_from_db()
        return fork
    program = programs.get(fork.run.workflow_id)
    if program is None:
        RunFork.objects.filter(pk=fork_pk).update(status=ForkStatus.EXTERNAL)
        return fork
    status, code, message = ForkStatus.COMPLETED, "", ""
    waiting: GateWaiting | None = None
    session = ForkSession(fork.run.workspace, f"replay:{fork.mode}", fork)
    try:
        watch = StopWatch(
            partial(run_was_cancelled, fork.run_id),
            session.stop,
            every=CANCEL_WATCH_SECONDS,
            name=f"fork-cancel-{fork.run_id}",
        )
        with watch:
            session.check_cancelled()  # cancelled while it waited in the queue
            program(session)
    except GateWaiting as exc:
        status, waiting = ForkStatus.WAITING, exc
    except (ForkCancelled, StopRequested):
        status, code, message = ForkStatus.FAILED, CANCELLED, ""
    except ReplayError as exc:
        status, code, message = ForkStatus.FAILED, exc.code, exc.message
    except ActionError as exc:
        status, code, message = ForkStatus.FAILED, exc.code, exc.message
    except Exception as exc:  # the step code crashed: the fork ends failed, never half-running
        log.exception("replay of %s crashed", fork.run.run_id)
        status, code, message = ForkStatus.FAILED, "STEP_CODE_FAILED", f"{type(exc).__name__}: {exc}"
    if status == ForkStatus.FAILED and (code == CANCELLED or run_was_cancelled(fork.run_id)):
        code, message = CANCELLED, f"cancelled by {cancelled_by(fork)}"  # the run says cancelled
    elif status == ForkStatus.FAILED:
        _fail_run(fork, code, message)
    RunFork.objects.filter(pk=fork_pk).update(
        status=status,
        error_code=code,
        error_message=message,
        finished_at=None if waiting is not None else timezone.now(),
    )
    if waiting is not None and not _gate_still_waiting(fork, waiting):
        # A reviewer decided while the step code was still on its way to the gate: go on.
        if RunFork.objects.filter(pk=fork_pk, status=ForkStatus.WAITING).update(
            status=ForkStatus.PENDING, attempts=0
        ):
            dispatch(fork_pk)
    fork.refresh_from_db()
    if fork.status in (ForkStatus.COMPLETED, ForkStatus.FAILED):
        _finished(fork)
    return fork


_finished_hooks: list[Callable[[RunFork], None]] = []


def register_fork_finished(hook: Callable[[RunFork], None]) -> None:
    """``hook(fork)`` after a fork ends completed or failed (an app on top of runs registers it in
    its AppConfig.ready: evals refreshes an experiment item that was waiting at a gate)."""
    if hook not in _finished_hooks:
        _finished_hooks.append(hook)


def _finished(fork: RunFork) -> None:
    for hook in _finished_hooks:
        try:
            hook(fork)
        except Exception:  # a listener's failure never undoes the fork's outcome
            log.exception("after the fork %s finished", fork.pk)


def _gate_still_waiting(fork: RunFork, waiting: GateWaiting) -> bool:
    state = load_state(Run.unscoped.get(pk=fork.run_id))
    return any(
        g["stepId"] == waiting.step_id
        and g["gate"] == waiting.gate
        and g.get("checkpoint") == waiting.checkpoint
        for g in state.pending_gates()
    )


def resume_waiting_forks(change: RunChange) -> None:
    """A notify listener: a decision recorded on a fork that waits at a gate resumes it (the step
    code runs again from the start; everything already recorded is matched, not repeated)."""
    if change.first_seq == 0 or not change.run_pk:
        return
    if not change.may_hold_decision():
        return
    if RunFork.objects.filter(run_id=change.run_pk, status=ForkStatus.WAITING).update(
        status=ForkStatus.PENDING, attempts=0
    ):
        fork_pk = RunFork.objects.filter(run_id=change.run_pk).values_list("pk", flat=True).first()
        if fork_pk is not None:
            dispatch(fork_pk)


def dispatch(fork_pk: int) -> None:
    """Enqueue the fork's task (called once the fork's pending state is committed)."""
    try:
        fork_task.enqueue(fork_pk)
    except Exception as exc:  # the task backend refused: the fork says so instead of staying pending
        log.exception("replay %s not queued", fork_pk)
        message = f"the fork could not be queued for a worker ({type(exc).__name__}); fork the run again"
        if RunFork.objects.filter(pk=fork_pk, status=ForkStatus.PENDING).update(
            status=ForkStatus.FAILED, error_code=NOT_QUEUED, error_message=message, finished_at=timezone.now()
        ):
            _fail_run(
                RunFork.objects.select_related("run", "run__workspace").get(pk=fork_pk), NOT_QUEUED, message
            )
