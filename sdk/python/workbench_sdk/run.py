"""A run driven from the host: steps and their attempts, artifacts, gates with ``wait()``, its end.

    from workbench_sdk import RemoteRun, WorkbenchClient

    run = RemoteRun.start(WorkbenchClient(), workflow=WORKFLOW, title="nightly")
    with run.step("draft"):                       # step_started ... step_completed (ok or not)
        ...
    handle = run.gate("review", "CHECKPOINT", name="review", reason="Check the draft",
                      payload={"draft": text})    # the payload is shown in the gate panel
    decision = handle.wait(timeout=3600)          # {decision, note, edits, by, at, payload}
    if decision["decision"] == "rejected":
        ...                                       # revise: run.step("draft") again is attempt 2
    run.finish()

Runs started here are *external* (``metadata["workbench.driver"] = "external"``): the pipeline
orchestrates itself, so a step may start again (its next attempt), steps the workflow does not
name are added when they start, and a step may end after a rejected checkpoint; nothing moves
past a rejection until the pipeline retries or revises (see the server's PROTOCOL notes).

``wait()`` is a long poll on the server (``GET /api/runs/{id}/gates/wait``): it returns as soon
as a reviewer decides; the client never polls on an interval.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypedDict

from workbench_sdk.client import WorkbenchClient
from workbench_sdk.events import make_event
from workbench_sdk.pricing import PriceTable
from workbench_sdk.traced import ClientSink, ReplayFn, Tracer

__all__ = [
    "DRIVER_METADATA_KEY",
    "EXTERNAL_DRIVER",
    "GATE_PAYLOAD_TYPE",
    "Decision",
    "GateClosed",
    "GateHandle",
    "GateTimeout",
    "RemoteRun",
    "gate_payload_key",
]

DRIVER_METADATA_KEY = "workbench.driver"
EXTERNAL_DRIVER = "external"
GATE_PAYLOAD_TYPE = "workbench.gate-payload"
GATES = ("PAUSE_BEFORE", "PAUSE_AFTER", "CHECKPOINT")
LONG_POLL_SECONDS = 25.0


def gate_payload_key(step_id: str, gate: str, checkpoint: str | None = None) -> str:
    """The artifact that holds what a gate asks the reviewer to look at (the gate panel shows it)."""
    return f"gate:{step_id}:{checkpoint or gate}"


class Decision(TypedDict):
    """What a reviewer decided at a gate, as the pipeline receives it."""

    decision: str  # approved | rejected | edited
    note: str | None  # the reviewer's words
    edits: list[dict[str, Any]]  # the artifact version an "edited" decision wrote
    by: str | None  # who decided (e.g. "user:alice")
    at: str | None  # when (the resolution's timestamp)
    payload: Any  # the gate's payload: as the reviewer edited it, else as it was asked


class GateTimeout(TimeoutError):
    """Nobody decided the gate within the time given to ``wait``."""


class GateClosed(RuntimeError):
    """The run ended (cancelled, failed, completed) before anyone decided the gate."""


class GateHandle:
    """A gate requested by the host: ``wait()`` for the decision."""

    def __init__(
        self,
        run: RemoteRun,
        *,
        step_id: str,
        gate: str,
        checkpoint: str | None,
        request_seq: int,
        payload: Any = None,
    ) -> None:
        self.run = run
        self.step_id = step_id
        self.gate = gate
        self.checkpoint = checkpoint
        self.request_seq = request_seq
        self.payload = payload

    def __repr__(self) -> str:
        name = f" {self.checkpoint!r}" if self.checkpoint else ""
        return f"<GateHandle {self.gate}{name} on {self.step_id!r} of {self.run.run_id!r}>"

    def poll(self, timeout: float = 0.0) -> Decision | None:
        """One long poll of at most ``timeout`` seconds: the decision, or None while pending."""
        answer = self.run.client.wait_for_gate(
            self.run.run_id,
            step_id=self.step_id,
            gate=self.gate,
            checkpoint=self.checkpoint,
            after_seq=self.request_seq,
            timeout=timeout,
        )
        if answer["status"] == "decided":
            return self._decision(answer)
        if answer["status"] == "closed":
            raise GateClosed(answer.get("note") or "the run ended before the gate was decided")
        return None

    def wait(self, timeout: float | None = None) -> Decision:
        """Block until a reviewer decides (``GateTimeout`` after ``timeout`` seconds; ``None``: no limit)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = (
                LONG_POLL_SECONDS if deadline is None else min(LONG_POLL_SECONDS, deadline - time.monotonic())
            )
            if left <= 0:
                raise GateTimeout(f"no decision on {self!r} within {timeout} s")
            decision = self.poll(left)
            if decision is not None:
                return decision

    async def wait_async(self, timeout: float | None = None) -> Decision:
        """``wait`` for async code (the long poll runs in a worker thread)."""
        import asyncio  # only async callers pay for it

        return await asyncio.to_thread(self.wait, timeout)

    def _decision(self, answer: dict[str, Any]) -> Decision:
        edits = list(answer.get("edits") or [])
        payload = self.payload
        key = gate_payload_key(self.step_id, self.gate, self.checkpoint)
        for edit in edits:
            if edit.get("artifactKey") == key:
                payload = edit.get("data")
        return Decision(
            decision=answer["decision"],
            note=answer.get("note"),
            edits=edits,
            by=answer.get("by"),
            at=answer.get("at"),
            payload=payload,
        )


class RemoteRun:
    """A run of a remote Workbench that this process drives (events go over REST)."""

    def __init__(
        self,
        client: WorkbenchClient,
        run_id: str,
        *,
        prices: PriceTable | None = None,
        replay: ReplayFn | None = None,
    ) -> None:
        self.client = client
        self.run_id = run_id
        self.prices = prices
        self.replay = replay  # asked before each model call of the traced clients

    def __repr__(self) -> str:
        return f"<RemoteRun {self.run_id!r}>"

    @classmethod
    def start(
        cls,
        client: WorkbenchClient,
        *,
        workflow: dict[str, Any],
        title: str | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        subject: dict[str, Any] | None = None,
        run_id: str | None = None,
        prices: PriceTable | None = None,
    ) -> RemoteRun:
        """Start an external run of ``workflow`` (steps not named there may be added as they start)."""
        meta = {**(metadata or {}), DRIVER_METADATA_KEY: EXTERNAL_DRIVER}
        started = client.start_run(
            workflow=workflow, run_id=run_id, title=title, tags=tags, metadata=meta, subject=subject
        )
        return cls(client, started["runId"], prices=prices)

    @classmethod
    def replay_of(
        cls,
        client: WorkbenchClient,
        source_run_id: str,
        *,
        from_seq: int = 0,
        prices: PriceTable | None = None,
    ) -> RemoteRun:
        """Fork ``source_run_id`` as a replay that this host re-executes: model calls through the
        traced clients are answered from the server's response cache (``/api/cache``, the source's
        answers preferred) and recorded as ``replayed``, which the determinism report counts as
        cache hits. Run the pipeline inside ``workbench_sdk.scope(replay)``, then ``finish()``."""
        fork = client.fork(source_run_id, mode="replay", from_seq=from_seq)
        return cls(client, fork["runId"], prices=prices, replay=client.replay_fn(prefer_run_id=source_run_id))

    # -- events -----------------------------------------------------------------------------------

    def record(self, events: list[dict[str, Any]]) -> dict[str, Any]:
        """Append events (``POST /runs/{id}/events``): the server's answer (``seqs``, ``lastSeq``)."""
        return self.client.append_events(self.run_id, events)

    def event(self, type: str, **fields: Any) -> dict[str, Any]:
        """Record one event of ``type`` (protocol 1.0.0 fields)."""
        return self.record([make_event(self.run_id, type, **fields)])

    def start_step(self, step_id: str) -> dict[str, Any]:
        """``step_started``: the step's next attempt (attempt n is its n-th ``step_started``)."""
        return self.event("step_started", stepId=step_id)

    def complete_step(
        self, step_id: str, *, ok: bool = True, error: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        fields: dict[str, Any] = {"stepId": step_id, "ok": ok}
        if not ok:
            fields["error"] = error or {"message": "step failed"}
        return self.event("step_completed", **fields)

    @contextmanager
    def step(self, step_id: str) -> Iterator[RemoteRun]:
        """One attempt of ``step_id``: completed when the block ends, failed when it raises."""
        self.start_step(step_id)
        try:
            yield self
        except BaseException as exc:
            self.complete_step(step_id, ok=False, error=error_of(exc))
            raise
        self.complete_step(step_id)

    def artifact(
        self, key: str, data: Any, *, type_id: str = "json", step_id: str | None = None
    ) -> dict[str, Any]:
        """Write the next version of artifact ``key`` (the server numbers it)."""
        return self.client.write_artifact(self.run_id, key=key, type_id=type_id, data=data, step_id=step_id)

    def tracer(self, step_id: str | None = None) -> Tracer:
        """A :class:`Tracer` for the traced provider clients, recording into this run."""
        return Tracer(
            ClientSink(self.client, self.run_id), step_id=step_id, prices=self.prices, replay=self.replay
        )

    # -- gates ------------------------------------------------------------------------------------

    def gate(
        self,
        step_id: str,
        kind: str = "CHECKPOINT",
        *,
        name: str | None = None,
        reason: str | None = None,
        payload: Any = None,
    ) -> GateHandle:
        """Ask a reviewer: ``human_gate_requested`` (its payload, when given, written first as the
        artifact ``gate:<step>:<name or kind>``, which the gate panel shows and a reviewer may edit).

        Inside a running step a CHECKPOINT is named (``name``, default ``step_id``); the name
        travels in ``correlationId`` as ``checkpoint:<name>``."""
        if kind not in GATES:
            raise ValueError(f"kind must be one of {', '.join(GATES)}")
        checkpoint = (name or step_id) if kind == "CHECKPOINT" else None
        if name is not None and kind != "CHECKPOINT":
            raise ValueError("only CHECKPOINT gates are named")
        if payload is not None:
            key = gate_payload_key(step_id, kind, checkpoint)
            self.artifact(key, payload, type_id=GATE_PAYLOAD_TYPE, step_id=step_id)
        fields: dict[str, Any] = {"stepId": step_id, "gate": kind}
        if checkpoint:
            fields["correlationId"] = f"checkpoint:{checkpoint}"
        if reason:
            fields["reason"] = reason
        answer = self.event("human_gate_requested", **fields)
        return GateHandle(
            self,
            step_id=step_id,
            gate=kind,
            checkpoint=checkpoint,
            request_seq=answer["seqs"][-1],
            payload=payload,
        )

    # -- the end ----------------------------------------------------------------------------------

    def finish(self, status: str = "completed", *, reason: str | None = None) -> dict[str, Any]:
        """``run_status_changed`` to ``completed`` (or ``cancelled``)."""
        fields: dict[str, Any] = {"status": status}
        if reason:
            fields["reason"] = reason
        return self.event("run_status_changed", **fields)

    def fail(self, reason: str, *, code: str | None = None) -> dict[str, Any]:
        """The run failed: a fatal ``error``, then ``run_status_changed: failed``."""
        error: dict[str, Any] = {"message": reason, "fatal": True}
        if code:
            error["code"] = code
        return self.record(
            [
                make_event(self.run_id, "error", **error),
                make_event(self.run_id, "run_status_changed", status="failed", reason=reason),
            ]
        )


def error_of(exc: BaseException) -> dict[str, str]:
    """A protocol error object for an exception: ``{message, code}`` (code: the exception's type)."""
    return {"message": f"{type(exc).__name__}: {exc}"[:2000], "code": type(exc).__name__}
