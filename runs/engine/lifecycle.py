"""Creating runs: ``new_run`` (a run's initial state), ``fork_run`` (a new run branched off another,
with the events that carry its artifacts, rule sets and gate policies over) and a run's title
(``check_title``, ``run_title``, ``with_title``)."""

from __future__ import annotations

from typing import Any

from runs.engine.commands import Context
from runs.engine.errors import EngineError, ErrorCode
from runs.engine.guards import engine_error, make_event, nonempty_str, require_step
from runs.engine.state import DRIVER_METADATA_KEY, EXTERNAL_DRIVER, RunState
from runs.engine.workflow import normalize_workflow


def _check_subject(subject: Any) -> dict[str, str]:
    if not isinstance(subject, dict):
        raise engine_error(ErrorCode.INVALID_INPUT, "subject must be an object", "subject")
    for key, value in subject.items():
        if key not in ("userId", "tenantId", "accountId", "planId"):
            raise engine_error(ErrorCode.INVALID_INPUT, f"unknown subject field {key!r}", f"subject.{key}")
        nonempty_str(value, f"subject.{key}", key)
    return subject


def _check_context(context: Any) -> dict[str, Any]:
    if not isinstance(context, dict):
        raise engine_error(ErrorCode.INVALID_INPUT, "context must be an object", "context")
    parent = context.get("parentRunId")
    parents = context.get("parentRunIds")
    if parent is None and parents is None:
        raise engine_error(ErrorCode.INVALID_INPUT, "context needs parentRunId or parentRunIds", "context")
    if parent is not None:
        nonempty_str(parent, "context.parentRunId", "parentRunId")
    if parents is not None:
        if not isinstance(parents, list) or not parents or not all(isinstance(p, str) and p for p in parents):
            raise engine_error(
                ErrorCode.INVALID_INPUT,
                "parentRunIds must be a non-empty list of run ids",
                "context.parentRunIds",
            )
        if parent is not None and parents[0] != parent:
            raise engine_error(
                ErrorCode.INVALID_INPUT, "parentRunIds[0] must equal parentRunId", "context.parentRunIds"
            )
    return context


# A run's title (what tells it apart in lists): set by the pipeline, kept in the protocol's free-form
# `run.metadata` under this key, since the protocol's RunInstance has no title field and `subject`
# is strictly {userId, tenantId, accountId, planId}. Bundles carry it unchanged.
TITLE_KEY = "workbench.title"
TITLE_MAX = 300


def check_title(title: object, path: str = "title") -> str:
    """A run title: a string of 1..300 characters once trimmed, no control characters."""
    if not isinstance(title, str) or not title.strip():
        raise engine_error(ErrorCode.INVALID_INPUT, "title must be a non-empty string", path)
    title = title.strip()
    if len(title) > TITLE_MAX:
        raise engine_error(ErrorCode.INVALID_INPUT, f"title must be at most {TITLE_MAX} characters", path)
    if any(ord(ch) < 32 or 127 <= ord(ch) < 160 for ch in title):
        raise engine_error(ErrorCode.INVALID_INPUT, "title must not contain control characters", path)
    return title


def run_title(run: dict[str, Any]) -> str:
    """What a run is called: its own title (metadata) when valid, else its workflow's title or id.
    Lenient (a bundle from elsewhere may carry anything under the key): never raises."""
    metadata = run.get("metadata")
    own = metadata.get(TITLE_KEY) if isinstance(metadata, dict) else None
    try:
        return check_title(own)
    except EngineError:
        pass
    snapshot = found if isinstance(found := run.get("workflowSnapshot"), dict) else {}
    return str(snapshot.get("title") or run.get("workflowId") or "")[:TITLE_MAX]


def with_title(run: dict[str, Any], title: str) -> dict[str, Any]:
    """A copy of the run document whose metadata names ``title`` (checked)."""
    metadata = dict(run["metadata"]) if isinstance(run.get("metadata"), dict) else {}
    metadata[TITLE_KEY] = check_title(title)
    return {**run, "metadata": metadata}


def new_run(
    *,
    ctx: Context,
    workflow: dict[str, Any],
    run_id: str | None = None,
    subject: dict[str, str] | None = None,
    metadata: dict[str, Any] | None = None,
    tags: list[str] | None = None,
    context: dict[str, Any] | None = None,
    title: str | None = None,
) -> RunState:
    """The initial state of a new run of ``workflow`` (``INVALID_WORKFLOW`` when malformed).
    ``title`` (or ``metadata["workbench.title"]``) names the run; it is checked either way."""
    spec = normalize_workflow(workflow)
    run: dict[str, Any] = {
        "id": run_id if run_id is not None else ctx.new_id("run"),
        "workflowId": spec["id"],
        "workflowVersion": spec["version"],
        "workflowSnapshot": spec,
        "startedAt": ctx.now(),
        "status": "running",
    }
    nonempty_str(run["id"], "runId", "run id")
    if context is not None:
        run["context"] = _check_context(context)
    if subject is not None:
        run["subject"] = _check_subject(subject)
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise engine_error(ErrorCode.INVALID_INPUT, "metadata must be a JSON object", "metadata")
        driver = metadata.get(DRIVER_METADATA_KEY)
        if driver is not None and driver != EXTERNAL_DRIVER:
            raise engine_error(
                ErrorCode.INVALID_INPUT,
                f'{DRIVER_METADATA_KEY} is "{EXTERNAL_DRIVER}" (a run its pipeline drives) or absent',
                f"metadata.{DRIVER_METADATA_KEY}",
            )
        run["metadata"] = metadata
        if TITLE_KEY in metadata:
            run = with_title(run, check_title(metadata[TITLE_KEY], f"metadata.{TITLE_KEY}"))
    if title is not None:
        run = with_title(run, title)
    if tags is not None:
        if not isinstance(tags, list | tuple) or not all(isinstance(t, str) for t in tags):
            raise engine_error(ErrorCode.INVALID_INPUT, "tags must be a list of strings", "tags")
        run["tags"] = list(tags)
    return RunState.initial(run)


def fork_run(
    parent: RunState,
    *,
    ctx: Context,
    new_run_id: str | None = None,
    from_seq: int | None = None,
    from_step_id: str | None = None,
    extra_parents: tuple[str, ...] | list[str] = (),
) -> tuple[RunState, list[dict[str, Any]]]:
    """Branch a new run off ``parent`` (the parent's state at the fork point).

    The child gets the parent's workflow snapshot, subject, metadata and tags (plus
    ``fork``), ``context`` with the parent ids and ``forkedFromStepId``. Returned events
    (to apply to the returned initial state) write the parent's latest artifacts as
    version 1, re-emit its rule sets and gate policy overrides, and end with
    ``run_forked``, like the reference's fork helpers. ``from_seq``, when given, must be
    the revision ``parent`` was folded to; it is recorded as ``metadata.forkedFromSeq``.
    """
    if from_seq is not None:
        if type(from_seq) is not int or from_seq < 0 or from_seq != parent.revision:
            raise engine_error(
                ErrorCode.INVALID_INPUT,
                f"fork from seq {from_seq}: the parent state given is at seq {parent.revision} (fold it to {from_seq} first)",
                "fromSeq",
            )
    if from_step_id is not None:
        require_step(parent, from_step_id, "fromStepId")
    extras = [p for p in extra_parents if p != parent.run_id]
    for p in extras:
        nonempty_str(p, "extraParents", "parent run id")
    prun = parent.run
    context: dict[str, Any] = {
        "parentRunId": prun["id"],
        "parentRunIds": [prun["id"], *dict.fromkeys(extras)],
    }
    if from_step_id is not None:
        context["forkedFromStepId"] = from_step_id
    metadata = dict(prun["metadata"]) if isinstance(prun.get("metadata"), dict) else None
    if from_seq is not None:
        metadata = {**(metadata or {}), "forkedFromSeq": from_seq}
    tags = list(dict.fromkeys([*(prun.get("tags") or []), "fork"]))
    child = new_run(
        ctx=ctx,
        workflow=prun["workflowSnapshot"],
        run_id=new_run_id,
        subject=prun.get("subject"),
        metadata=metadata,
        tags=tags,
        context=context,
    )
    ts = child.run["startedAt"]
    events: list[dict[str, Any]] = []
    for art in parent.artifacts.values():
        artifact = {"artifactKey": art["artifactKey"], "typeId": art["typeId"], "version": 1, "createdAt": ts}
        if "data" in art:
            artifact["data"] = art["data"]
        if "pointer" in art:
            artifact["pointer"] = art["pointer"]
        events.append(make_event(child, ctx, "artifact_written", ts=ts, artifact=artifact))
    for rid, rule_set in parent.rule_sets.items():
        events.append(make_event(child, ctx, "rule_changed", ts=ts, ruleSetId=rid, snapshot=rule_set))
    for sid, policy in parent.policies.items():
        if policy != child.policy(sid):
            events.append(make_event(child, ctx, "policy_changed", ts=ts, step_id=sid, policy=policy))
    events.append(
        make_event(
            child,
            ctx,
            "run_forked",
            parentRunId=prun["id"],
            parentRunIds=context["parentRunIds"] if extras else None,
            forkedFromStepId=from_step_id,
        )
    )
    return child, events
