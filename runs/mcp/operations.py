"""What each MCP tool does, as plain synchronous functions over a caller's principal.

The MCP adapter (runs/mcp/server.py) only parses arguments, runs these in a worker thread and
shapes the result. Rights are checked here the same way the REST handlers check them (the
principal's scopes), reads go through the workspace-scoped selectors and every write through
runs.actions. A run of another workspace is reported exactly like a missing one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings

from accounts.principals import NotPermitted, Principal
from runs import actions
from runs.actions.forks import do_fork_with_history
from runs.actions.gatepolicy import do_decide_gate
from runs.actions.permissions import Action
from runs.actions.signing import do_export_bundle
from runs.engine import commands as cmd
from runs.engine.fold import CHECKPOINT_CORRELATION_PREFIX
from runs.engine.state import RunState
from runs.models import ArtifactVersion, Event, Run
from runs.protocol.bundle import check_bundle
from runs.protocol.canonical import canonical_bytes
from runs.protocol.errors import ErrorCode, ProtocolError
from runs.protocol.redaction import POLICIES as REDACTION_POLICIES
from runs.protocol.values import loads
from runs.selectors.gates import gate_decision
from runs.selectors.prompts import find_version, version_doc
from runs.selectors.run_list import without_judge_calls
from runs.selectors.runs import RunNotFound, get_run, is_judge_call, run_state, runs_of
from runs.selectors.signing import bundle_signature

MAX_LIST = 500
# The longest a request_decision call may be held open waiting for a reviewer (seconds).
MAX_DECISION_WAIT = 300
UNAUTHENTICATED = "UNAUTHENTICATED"
FORBIDDEN = "FORBIDDEN"


class Refused(Exception):
    """A tool call that cannot be honoured; nothing was changed. Shown to the client as ``CODE: message``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def authorized_caller(principal: Principal | None, action: Action) -> Principal:
    """The caller, once the permission table (runs.actions.permissions) allows ``action``."""
    if principal is None:
        raise Refused(
            UNAUTHENTICATED, "this tool needs a workspace token: send Authorization: Bearer <token>"
        )
    try:
        principal.require_action(action)
    except NotPermitted as exc:
        raise Refused(FORBIDDEN, str(exc)) from None
    return principal


def _run(principal: Principal, run_id: str) -> Run:
    try:
        run = get_run(principal.workspace, run_id)
    except RunNotFound:
        raise Refused(ErrorCode.UNKNOWN_RUN, f"no run {run_id!r}") from None
    if is_judge_call(run) and not principal.may(Action.MANAGE_JUDGES):  # a judge's call: its owners'
        raise Refused(ErrorCode.UNKNOWN_RUN, f"no run {run_id!r}")
    return run


def _write[T](fn: Callable[..., T], **kwargs: Any) -> T:
    try:
        return fn(**kwargs)
    except actions.ActionError as exc:
        where = f" (at {exc.path})" if exc.path else ""
        raise Refused(exc.code, exc.message + where) from None
    except RunNotFound:
        raise Refused(ErrorCode.UNKNOWN_RUN, f"no run {kwargs.get('run_id')!r}") from None
    except ProtocolError as exc:
        raise Refused(exc.code, exc.message) from None


def run_id_of(run: Run) -> str:
    return run.run_doc["id"]


def write_result(run: Run, seqs: list[int], *, created: bool = False) -> dict[str, Any]:
    return {
        "runId": run_id_of(run),
        "revision": run.revision,
        "status": run.status,
        "lastSeq": run.last_seq,
        "seqs": seqs,
        "created": created,
    }


def run_summary(run: Run) -> dict[str, Any]:
    doc = run.run_doc
    out = {
        "id": run_id_of(run),
        "workflowId": run.workflow_id,
        "title": run.title,
        "status": run.status,
        "startedAt": doc.get("startedAt"),
        "revision": run.revision,
        "lastSeq": run.last_seq,
        "pendingGates": run.pending_gates,
    }
    if doc.get("endedAt"):
        out["endedAt"] = doc["endedAt"]
    if doc.get("tags") is not None:
        out["tags"] = doc["tags"]
    return out


# --------------------------------------------------------------------------------------------
# Reads


def list_runs(principal: Principal | None, *, limit: int = 100, status: str | None = None) -> dict:
    caller = authorized_caller(principal, Action.VIEW_RUN)
    limit = min(max(int(limit), 1), MAX_LIST)
    qs = runs_of(caller.workspace)
    if not caller.may(Action.MANAGE_JUDGES):
        qs = without_judge_calls(qs)  # a gate judge's own calls: its owners'
    if status:
        qs = qs.filter(status=status)
    return {"runs": [run_summary(run) for run in qs[:limit]]}


def get_run_detail(principal: Principal | None, *, run_id: str) -> dict:
    caller = authorized_caller(principal, Action.VIEW_RUN)
    run = _run(caller, run_id)
    state = RunState.from_json(loads(run.state))
    return {
        **run_summary(run),
        "run": run.run_doc,
        "stepStatus": dict(state.step_status),
        "gates": state.pending_gates(),
        "artifacts": {key: len(versions) for key, versions in _artifact_versions(run).items()},
        "totals": {
            "modelCalls": run.model_calls,
            "totalTokens": run.total_tokens,
            "cost": dict(run.cost_totals or {}),
        },
    }


def _artifact_versions(run: Run) -> dict[str, list[int]]:

    out: dict[str, list[int]] = {}
    for key, version in ArtifactVersion.objects.filter(run=run).order_by("id").values_list("key", "version"):
        out.setdefault(key, []).append(version)
    return out


def export_bundle(
    principal: Principal | None, *, run_id: str, redact: str | None = None
) -> tuple[bytes, dict]:
    """The run's bundle signed for the caller: its canonical bytes and the parsed document; with
    ``redact`` the redacted user bundle of that policy, as the REST and page exports make it."""
    caller = authorized_caller(principal, Action.VIEW_RUN)
    if redact is not None and redact not in REDACTION_POLICIES:
        raise Refused(
            ErrorCode.INVALID_INPUT,
            f"unknown redaction policy {redact!r}; expected one of {', '.join(REDACTION_POLICIES)}",
        )
    run = _run(caller, run_id)
    export = do_export_bundle(run, exported_by=caller.actor, redact=redact)
    return export.data, export.bundle


def _signature(result: Any) -> dict | None:
    if not result.ok or result.bundle is None:
        return None
    verdict = bundle_signature(result.bundle, result.gate_resolved)
    return {**verdict.to_json(), "summary": verdict.summary()}


def verify_run_integrity(principal: Principal | None, *, run_id: str) -> dict:
    """Export the stored run, signed, and verify the export as any other implementation would
    (integrity hash), then its signature against this instance's published keys."""
    data, bundle = export_bundle(principal, run_id=run_id)
    result = check_bundle(data)
    return {
        "runId": run_id,
        "ok": bool(result.ok),
        "integrity": str(result.integrity),
        "sha256": bundle["integrity"]["sha256"],
        "code": result.code,
        "message": result.message,
        "events": len(bundle["trace"]),
        "bytes": len(data),
        "signature": _signature(result),
    }


def validate_run_bundle(principal: Principal | None, *, bundle: Any) -> dict:
    """Check a bundle (a JSON object, or its text exactly as received) without storing anything:
    schema, integrity hash, structure, then its signature against this instance's keys."""
    authorized_caller(principal, Action.VERIFY_BUNDLE)
    data = bundle.encode() if isinstance(bundle, str) else canonical_or_refuse(bundle)
    result = check_bundle(data)
    parsed = result.bundle or {}
    integrity = parsed.get("integrity") if isinstance(parsed, dict) else None
    signature = _signature(result)
    out = {
        "ok": bool(result.ok),
        "code": result.code,
        "integrity": str(result.integrity),
        "message": result.message,
        "sha256": integrity.get("sha256") if isinstance(integrity, dict) else None,
        "migrated": bool(result.migrated),
        "signature": signature,
    }
    if signature is not None and not signature["ok"]:
        out.update(ok=False, code=signature["code"], message=signature["message"])
    return out


def canonical_or_refuse(value: Any) -> bytes:
    try:
        return canonical_bytes(value)
    except ProtocolError as exc:
        raise Refused(exc.code, exc.message) from None
    except (TypeError, ValueError) as exc:
        raise Refused(ErrorCode.INVALID_JSON, str(exc)) from None


# --------------------------------------------------------------------------------------------
# Writes (through runs.actions only)


def start_run(
    principal: Principal | None,
    *,
    workflow: dict,
    run_id: str | None = None,
    subject: dict | None = None,
    metadata: dict | None = None,
    tags: list[str] | None = None,
) -> dict:
    caller = authorized_caller(principal, Action.START_RUN)
    run = _write(
        actions.do_start_run,
        workspace=caller.workspace,
        workflow=workflow,
        actor=caller.actor,
        run_id=run_id,
        subject=subject,
        metadata=metadata,
        tags=tags,
    )
    return write_result(run, [], created=True)


def _command(caller: Principal, run_id: str, command: Any, channel: str = "page") -> dict:
    result = _write(
        actions.do_command,
        workspace=caller.workspace,
        run_id=run_id,
        command=command,
        actor=caller.actor,
        channel=channel,
    )
    return write_result(result.run, result.seqs)


def resolve_gate(
    principal: Principal | None,
    *,
    run_id: str,
    step_id: str,
    gate: str,
    decision: str,
    note: str | None = None,
    checkpoint: str | None = None,
    channel: str = "mcp",
) -> dict:
    caller = authorized_caller(principal, Action.RESOLVE_GATE)
    _run(caller, run_id)
    decided = _write(  # under the gate's policy, as REST and pages (a budget gate needs a raise)
        do_decide_gate,
        workspace=caller.workspace,
        run_id=run_id,
        step_id=step_id,
        gate=gate,
        decision=decision,
        note=note,
        checkpoint=checkpoint,
        actor=caller.actor,
        channel=channel,
    )
    return write_result(decided.result.run, decided.result.seqs)


def gate_to_review(
    principal: Principal | None, *, run_id: str, step_id: str, gate: str, checkpoint: str | None = None
) -> dict:
    """What a reviewer is asked about a waiting gate (review_gate): its run, step and reason.
    Refused when the caller may not decide gates or the gate is not waiting."""
    caller = authorized_caller(principal, Action.RESOLVE_GATE)
    run = _run(caller, run_id)
    state = run_state(run)
    key = (step_id, gate, checkpoint)
    waiting = next(
        (g for g in state.pending_gates() if (g["stepId"], g["gate"], g.get("checkpoint")) == key), None
    )
    if waiting is None:
        raise Refused(
            ErrorCode.INVALID_STATE_TRANSITION,
            f"no {gate} gate of step {step_id!r} is waiting in run {run_id!r} (decided already, or never requested)",
        )
    steps = state.run.get("workflowSnapshot", {}).get("steps", [])
    step: dict[str, Any] = next((s for s in steps if s.get("id") == step_id), {})
    return {
        "runId": run_id_of(run),
        "title": run.title or run_id_of(run),
        "stepId": step_id,
        "stepTitle": step.get("title") or step_id,
        "gate": gate,
        "checkpoint": checkpoint,
        "reason": waiting.get("reason"),
    }


def write_artifact(
    principal: Principal | None,
    *,
    run_id: str,
    artifact_key: str,
    type_id: str,
    data: Any,
    step_id: str | None = None,
    idempotency_key: str | None = None,
) -> dict:
    caller = authorized_caller(principal, Action.EDIT_ARTIFACT)
    _run(caller, run_id)
    options: dict[str, Any] = {}
    if step_id is not None:
        options["step_id"] = step_id
    if idempotency_key is not None:
        options["idempotency_key"] = idempotency_key
    command = cmd.WriteArtifact(key=artifact_key, type_id=type_id, data=data, **options)
    return _command(caller, run_id, command)


def fork_run(
    principal: Principal | None,
    *,
    run_id: str,
    mode: str | None = None,
    from_seq: int | None = None,
    from_step_id: str | None = None,
    overlay: dict | None = None,
    new_run_id: str | None = None,
) -> dict:
    """Fork a run into a new run of the same workspace.

    With ``mode`` (``replay`` or ``branch``) this is the fork of runs.actions.forks: history before
    ``from_seq`` copied, a replay answered from the response cache, a branch with ``overlay``.
    Without it, the lightweight branch of the latest state (or the state at ``from_seq``).
    """
    caller = authorized_caller(principal, Action.FORK_RUN)
    _run(caller, run_id)
    if mode is not None:
        fork = _write(
            do_fork_with_history,
            workspace=caller.workspace,
            source_run_id=run_id,
            mode=mode,
            from_seq=from_seq,
            overlay=overlay,
            actor=caller.actor,
            new_run_id=new_run_id,
        )
        child = fork.run
    else:
        child = _write(
            actions.do_fork_from_state,
            workspace=caller.workspace,
            parent_run_id=run_id,
            actor=caller.actor,
            from_seq=from_seq,
            from_step_id=from_step_id,
            new_run_id=new_run_id,
        )
    return {
        **write_result(child, list(range(1, child.last_seq + 1)), created=True),
        "parentRunId": run_id,
        "mode": mode or "fork",
    }


# --------------------------------------------------------------------------------------------
# A human decision requested by an agent


def decision_wait(wait: int | None) -> float:
    """Seconds a request_decision call waits for the reviewer: the caller's ``waitSeconds`` or the
    server's default, never more than MAX_DECISION_WAIT."""
    if wait is None:
        wait = int(getattr(settings, "WORKBENCH_MCP_DECISION_WAIT_SECONDS", 25))
    return float(min(max(wait, 0), MAX_DECISION_WAIT))


def request_decision(
    principal: Principal | None,
    *,
    run_id: str,
    step_id: str,
    gate: str = "CHECKPOINT",
    checkpoint: str | None = None,
    reason: str | None = None,
    ticket: int | None = None,
) -> dict:
    """Ask a reviewer to decide at a gate; say whether they have.

    The first call (no ``ticket``) appends ``human_gate_requested`` (once: a gate already
    waiting is not requested twice) and answers ``pending`` with the ticket, the seq of that
    request. Later calls with the ticket answer ``pending`` until a reviewer has resolved the
    gate in the browser (or through REST/MCP), then ``decided`` with the decision and note.
    """
    caller = authorized_caller(principal, Action.APPEND_EVENTS)
    run = _run(caller, run_id)
    if gate == "CHECKPOINT" and not checkpoint:
        checkpoint = "agent-decision"
    if gate != "CHECKPOINT":
        checkpoint = None
    if ticket is None:
        result = _write(
            actions.do_command,
            workspace=caller.workspace,
            run_id=run_id,
            command=cmd.RequestGate(step_id=step_id, gate=gate, reason=reason, checkpoint=checkpoint),
            actor=caller.actor,
        )
        run = result.run
        ticket = _request_seq(run, result, step_id, gate, checkpoint)
    return decision_status(run, step_id=step_id, gate=gate, checkpoint=checkpoint, ticket=ticket)


def _request_seq(
    run: Run, result: actions.AppendResult, step_id: str, gate: str, checkpoint: str | None
) -> int:
    """The seq of the request event that opened this gate (just appended, or appended earlier)."""
    for offset, event in enumerate(result.events):
        if event["type"] == "human_gate_requested":
            return result.first_seq + offset
    corr = f"{CHECKPOINT_CORRELATION_PREFIX}{checkpoint}" if checkpoint else ""
    for seq, body in (
        Event.objects.filter(run=run, type="human_gate_requested", step_id=step_id, correlation_id=corr)
        .order_by("-seq")
        .values_list("seq", "body")
    ):
        if loads(body).get("gate") == gate:
            return seq
    raise Refused(ErrorCode.INVALID_STATE_TRANSITION, f'no gate {gate} was requested on step "{step_id}"')


def decision_status(run: Run, *, step_id: str, gate: str, checkpoint: str | None, ticket: int) -> dict:
    if ticket < 1 or ticket > run.last_seq:
        raise Refused(ErrorCode.INVALID_INPUT, f"ticket {ticket} does not name a request of this run")
    base = {
        "runId": run_id_of(run),
        "stepId": step_id,
        "gate": gate,
        "checkpoint": checkpoint,
        "ticket": ticket,
    }
    decided = gate_decision(run, step_id=step_id, gate=gate, checkpoint=checkpoint, after_seq=ticket)
    if decided is not None:
        return {
            **base,
            "status": "decided",
            "decision": decided["decision"],
            "note": decided["note"],
            "decidedBy": decided["by"],
            "decidedAtSeq": decided["seq"],
        }
    if run.status != "running":
        return {**base, "status": "closed", "decision": None, "note": f"the run is {run.status}"}
    return {**base, "status": "pending", "decision": None, "note": None}


def get_prompt(
    principal: Principal | None, *, name: str, label: str | None = None, version: int | None = None
) -> dict:
    """A prompt version by label (``production`` when neither is given) or number, as REST answers it."""
    caller = authorized_caller(principal, Action.VIEW_PROMPTS)
    if label is not None and version is not None:
        raise Refused(ErrorCode.INVALID_INPUT, "give label or version, not both")
    found = find_version(caller.workspace, name, label=label, version=version)
    if found is None:
        what = f"version {version}" if version is not None else f"label {label or 'production'}"
        raise Refused("NOT_FOUND", f"no prompt {name!r} with {what}")
    return version_doc(found)
