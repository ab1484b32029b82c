"""Fork a run from any event (seed 002): replay or branch. Part of the one write path.

A fork is a new run of the source's workflow snapshot whose first events are the source's
events ``< fromSeq``, copied as fixed history (same ids, timestamps and bodies, only ``runId``
changes), then ``run_forked`` naming the source. The source is never touched. What the
protocol has no field for (mode, fork point, overlay, replay bookkeeping) lives beside the run
in :class:`runs.models.RunFork`; the run document carries it in ``metadata["workbench.fork"]``.

Every later event appended to a *replay* fork, by whatever door, is compared with the source's
event at the same position (:func:`track_replay`): the first difference is recorded as a
divergence (a side record plus an ``annotation`` tagged ``workbench:replay.diverged``) and the
run goes on.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from runs.actions import responsecache
from runs.actions.core import (
    FORK_METADATA_KEY,
    ActionError,
    Appender,
    engine_context,
    lock_run,
    new_run_row,
    save_new_run,
    update_projection,
)
from runs.actions.notify import RunChange, fork_pending_on_commit, notify_on_commit
from runs.engine import programs
from runs.engine.divergence import (
    AUDIT_TAG,
    DIVERGED_TAG,
    REPLAYED_SUMMARY,
    divergence_kind,
    is_marker,
    same_event,
    score,
)
from runs.engine.errors import EngineError
from runs.engine.lifecycle import TITLE_KEY, TITLE_MAX, new_run, run_title
from runs.models import CachedResponse, Event, ForkMode, ForkStatus, Run, RunFork, Workspace
from runs.protocol.canonical import canonical_str
from runs.protocol.errors import ErrorCode, ProtocolError
from runs.protocol.values import loads, new_id, now_iso
from runs.selectors.runs import start_doc

MODES = (ForkMode.REPLAY, ForkMode.BRANCH)
OVERLAY_KEYS = frozenset({"configurable", "tags", "gateDecisions"})
GATE_DECISIONS = ("approved", "rejected", "edited")
REDACTED_MARKER = "[redacted]"

# Error codes the fork adds (HTTP status in runs.api.errors).
SEQ_OUT_OF_RANGE = "SEQ_OUT_OF_RANGE"  # 422: fromSeq names no event of the source's log
REPLAY_DATA_EXPIRED = "REPLAY_DATA_EXPIRED"  # 410: data a replay needs was deleted or expired


def _invalid(message: str, path: str = "") -> ActionError:
    return ActionError(ErrorCode.INVALID_INPUT, message, path)


def check_fork_request(mode: Any, from_seq: Any, overlay: Any) -> tuple[str, int, dict]:
    """The normalised (mode, fromSeq, overlay) of a fork request, or INVALID_INPUT."""
    if mode not in MODES:
        raise _invalid(f"mode must be one of {', '.join(MODES)}", "mode")
    if overlay is None:
        overlay = {}
    if not isinstance(overlay, dict):
        raise _invalid("runOptionsOverlay must be an object", "runOptionsOverlay")
    if mode == ForkMode.REPLAY:
        if overlay:
            raise _invalid(
                "a replay takes no runOptionsOverlay (it must be deterministic)", "runOptionsOverlay"
            )
        if from_seq is None:
            from_seq = 0
    elif from_seq is None:
        raise _invalid("a branch needs fromSeq (the event to branch from)", "fromSeq")
    if type(from_seq) is not int or from_seq < 0:
        raise _invalid("fromSeq must be an integer >= 0", "fromSeq")
    unknown = set(overlay) - OVERLAY_KEYS
    if unknown:
        raise _invalid(
            f"unknown overlay field(s) {', '.join(sorted(unknown))}; use {', '.join(sorted(OVERLAY_KEYS))}",
            "runOptionsOverlay",
        )
    if "configurable" in overlay and not isinstance(overlay["configurable"], dict):
        raise _invalid("configurable must be an object", "runOptionsOverlay.configurable")
    tags = overlay.get("tags")
    if tags is not None and (not isinstance(tags, list) or not all(isinstance(t, str) and t for t in tags)):
        raise _invalid("tags must be a list of non-empty strings", "runOptionsOverlay.tags")
    decisions = overlay.get("gateDecisions")
    if decisions is not None:
        if not isinstance(decisions, dict):
            raise _invalid("gateDecisions must map step ids to decisions", "runOptionsOverlay.gateDecisions")
        for step, decision in decisions.items():
            value = decision.get("decision") if isinstance(decision, dict) else decision
            if value not in GATE_DECISIONS:
                raise _invalid(
                    f"decision for {step!r} must be one of {', '.join(GATE_DECISIONS)}",
                    f"runOptionsOverlay.gateDecisions.{step}",
                )
    return str(mode), from_seq, overlay


def _missing_replay_data(workspace: Workspace, source: Run, from_seq: int) -> list[int]:
    """Seqs of the source's model answers (>= from_seq) whose cached response is gone."""
    pending: dict[str, tuple[int, dict]] = {}
    needed: dict[int, str] = {}
    last_request: tuple[int, dict] | None = None
    rows = Event.objects.filter(run=source, type="model_io").values_list("seq", "body").order_by("seq")
    for seq, body in rows.iterator(chunk_size=2000):
        event = loads(body)
        direction = event.get("direction")
        correlation = event.get("correlationId") or ""
        if direction == "request":
            pending[correlation] = (seq, event)
            last_request = (seq, event)
        elif direction == "response":
            found = pending.pop(correlation, None) if correlation else last_request
            last_request = None
            if found is None or seq < from_seq:
                continue
            keys = responsecache.event_keys(found[1])
            if keys is not None:
                needed[seq] = keys["v2"]
    if not needed:
        return []
    present = set(
        responsecache.retained(
            CachedResponse.objects.filter(workspace=workspace, key__in=set(needed.values()))
        ).values_list("key", flat=True)
    )
    return sorted(seq for seq, key in needed.items() if key not in present)


def replay_data_expired(source: Run, from_seq: int, missing: list[int]) -> ActionError:
    """410: the range a replay needs holds model answers whose cached responses are gone."""
    boundary = responsecache.retention_boundary()
    details: dict[str, Any] = {
        "sourceRunId": source.run_id,
        "fromSeq": from_seq,
        "unavailableSeqs": missing[:100],
        "retentionDays": settings.WORKBENCH_REPLAY_CACHE_DAYS,
        "retentionBoundary": boundary.isoformat() if boundary is not None else None,
    }
    kept = f"answers recorded or used before {boundary.isoformat()} have expired" if boundary else "no expiry"
    return ActionError(
        REPLAY_DATA_EXPIRED,
        f"the cached model responses a deterministic replay of {source.run_id!r} from seq {from_seq} "
        f"needs were deleted or expired (responses at seq {', '.join(map(str, missing[:10]))}; "
        f"retention: {kept}); branch instead, or replay from a later seq",
        "fromSeq",
        details=details,
    )


def do_fork_with_history(
    *,
    workspace: Workspace,
    source_run_id: str,
    mode: object,  # request input: checked by check_fork_request
    from_seq: object = None,
    overlay: object = None,
    actor: str = "",
    new_run_id: str | None = None,
    executable: bool | None = None,
) -> RunFork:
    """Create a replay or branch of a run; the worker re-executes it after commit when the
    workbench has the workflow's step code (``executable``: None = ask the program registry)."""
    mode, from_seq, overlay = check_fork_request(mode, from_seq, overlay)
    ctx = engine_context()
    with transaction.atomic():
        source = lock_run(workspace, source_run_id)
        if from_seq > source.last_seq:
            raise ActionError(
                SEQ_OUT_OF_RANGE,
                f"fromSeq {from_seq} is beyond the source's log (its last seq is {source.last_seq})",
                "fromSeq",
            )
        start = start_doc(source)

        program = programs.get(start["workflowId"])
        check = getattr(program, "check_fork", None)
        if check is not None:  # the step code refuses a fork it could not execute
            check(workspace=workspace, source=source, mode=mode, overlay=overlay)
        if mode == ForkMode.REPLAY:
            missing = _missing_replay_data(workspace, source, from_seq)
            if missing:
                raise replay_data_expired(source, from_seq, missing)
        history = max(from_seq - 1, 0)
        metadata = dict(start["metadata"]) if isinstance(start.get("metadata"), dict) else {}
        metadata.pop(FORK_METADATA_KEY, None)
        fork_info: dict[str, Any] = {"mode": mode, "sourceRunId": source.run_id, "fromSeq": from_seq}
        if overlay:
            fork_info["overlay"] = overlay
        metadata[FORK_METADATA_KEY] = fork_info
        # a fork gets its own title, so the lists tell it from its source
        suffix = f" ({mode} from #{from_seq})" if from_seq else f" ({mode})"
        base = source.title or run_title(start)
        metadata[TITLE_KEY] = (base[: TITLE_MAX - len(suffix)] + suffix).strip()
        tags = list(
            dict.fromkeys([*(start.get("tags") or []), "fork", f"fork:{mode}", *overlay.get("tags", [])])
        )
        fork_event = Event.objects.filter(run=source, seq=from_seq).values_list("step_id", flat=True).first()
        context: dict[str, Any] = {"parentRunId": source.run_id}
        if fork_event:
            context["forkedFromStepId"] = fork_event
        try:
            state = new_run(
                ctx=ctx,
                workflow=start["workflowSnapshot"],
                run_id=new_run_id,
                subject=start.get("subject"),
                metadata=metadata,
                tags=tags,
                context=context,
            )
        except (EngineError, ProtocolError) as exc:
            raise ActionError.wrap(exc) from exc
        child = new_run_row(workspace=workspace, state=state, actor=actor)
        save_new_run(child)
        appender = Appender(child, state, actor)
        rows = (
            Event.objects.filter(run=source, seq__lte=history).order_by("seq").values_list("body", flat=True)
        )
        for body in rows.iterator(chunk_size=2000):
            event = loads(body)
            event["runId"] = child.run_id
            appender.append(event)
        forked = {"id": new_id("evt"), "runId": child.run_id, "ts": now_iso(), "type": "run_forked"}
        forked["parentRunId"] = source.run_id
        if fork_event:
            forked["forkedFromStepId"] = fork_event
        appender.append(forked)
        redacted = Event.objects.filter(run=source, body__contains=f'"{REDACTED_MARKER}"').exists()
        if redacted:
            note = {
                "type": "audit.fork_of_redacted_run",
                "sourceRunId": source.run_id,
                "mode": mode,
                "fromSeq": from_seq,
                "actor": actor,
                "message": "the source run holds redacted fields; they stay redacted in this fork",
            }
            appender.append(
                {
                    "id": new_id("evt"),
                    "runId": child.run_id,
                    "ts": now_iso(),
                    "type": "annotation",
                    "text": canonical_str(note),
                    "tags": [AUDIT_TAG],
                }
            )
        first, last = appender.save()
        update_projection(child, state)
        if executable is None:
            executable = program is not None
        fork = RunFork.objects.create(
            run=child,
            source=source,
            source_run_id=source.run_id,
            mode=mode,
            from_seq=from_seq,
            overlay=overlay,
            history=history,
            source_last_seq=source.last_seq,
            cursor=history,
            status=ForkStatus.PENDING if executable else ForkStatus.EXTERNAL,
        )
        notify_on_commit(RunChange.of(child, first, last))
        if executable:
            fork_pending_on_commit(fork.pk)  # the executor (runs.execution) subscribed in ready()
    return fork


def track_replay(run: Run, appender: Appender, ctx: Any) -> None:
    """Compare the events being appended to a replay with the source's (inside the transaction)."""
    fork = RunFork.objects.select_for_update().filter(run=run).first()
    if fork is None or fork.mode != ForkMode.REPLAY:
        return
    own = [(i, event) for i, event in enumerate(appender.events) if not is_marker(event)]
    if not own:
        return
    start = fork.cursor + 1
    originals: dict[int, dict] = {}
    if fork.source_id is not None:
        originals = {
            seq: loads(body)
            for seq, body in Event.objects.filter(
                run_id=fork.source_id, seq__gte=start, seq__lt=start + len(own)
            ).values_list("seq", "body")
        }
    new_divergence = None
    fields = ["cursor", "compared", "matched"]
    if fork.status == ForkStatus.EXTERNAL:
        # The host replays: its answers say where they came from (the SDK marks an answer
        # served from the response cache with the ``replayed`` summary).
        answers = [e for _, e in own if e.get("type") == "model_io" and e.get("direction") == "response"]
        hits = sum(1 for e in answers if e.get("summary") == REPLAYED_SUMMARY)
        if answers:
            fork.cache_hits += hits
            fork.provider_calls += len(answers) - hits
            fields += ["cache_hits", "provider_calls"]
    for offset, (i, event) in enumerate(own):
        position = start + offset
        original = originals.get(position)
        fork.compared += 1
        if same_event(original, event):
            fork.matched += 1
        elif fork.divergence is None and new_divergence is None:
            new_divergence = {
                "sourceSeq": position,
                "replaySeq": appender.first_seq + i,
                "kind": divergence_kind(original, event),
                "original": original,
                "replay": event,
            }
    fork.cursor += len(own)
    if new_divergence is not None:
        fork.divergence = new_divergence
        fields.append("divergence")
        appender.append(divergence_annotation(run.run_id, fork, new_divergence))
    fork.save(update_fields=fields)


def divergence_annotation(run_id: str, fork: RunFork, divergence: dict) -> dict:
    original, replay = divergence.get("original"), divergence.get("replay")
    note = {
        "type": "replay.diverged",
        "sourceRunId": fork.source_run_id,
        "originalEventId": original.get("id") if original else None,
        "replayEventId": replay.get("id") if replay else None,
        "divergencePoint": divergence["sourceSeq"],
        "replaySeq": divergence["replaySeq"],
        "kind": divergence["kind"],
    }
    return {
        "id": new_id("evt"),
        "runId": run_id,
        "ts": now_iso(),
        "type": "annotation",
        "text": canonical_str(note),
        "tags": [DIVERGED_TAG],
    }


def determinism_report(fork: RunFork) -> dict[str, Any]:
    """seed 002's determinism report of a replay (counts are source positions >= fromSeq).

    While the replay runs, only the events it has produced so far are compared; once it has
    finished, source events it never produced count as compared and not matched.
    """

    run = fork.run
    source_last = fork.source.last_seq if fork.source is not None else fork.source_last_seq
    produced = fork.cursor - fork.history
    source_tail = max(source_last - fork.history, 0)
    finished = run.is_finished or fork.status in (ForkStatus.COMPLETED, ForkStatus.FAILED)
    compared = max(produced, source_tail) if finished else produced
    first = fork.divergence["sourceSeq"] if fork.divergence else None
    if first is None and finished and produced < source_tail:
        first = fork.cursor + 1
    return {
        "sourceRunId": fork.source_run_id,
        "replayRunId": run.run_id,
        "fromSeq": fork.from_seq,
        "matchedEvents": fork.matched,
        "comparedEvents": compared,
        "firstDivergenceSeq": first,
        "score": score(fork.matched, compared),
        "status": fork.status,
        "finished": finished,
        "cacheHits": fork.cache_hits,
        "providerCalls": fork.provider_calls,
        "historyEvents": fork.history,
        "explanation": explain(fork, first, finished),
    }


def _event_words(event: dict | None) -> str:
    """``human_gate_resolved (score)``: an event's type and the step (or name) it concerns."""
    if not event:
        return "nothing"
    about = event.get("stepId") or event.get("key") or event.get("name") or event.get("status")
    return f"{event.get('type')} ({about})" if about else str(event.get("type"))


def explain(fork: RunFork, first: int | None, finished: bool) -> str:
    """The report's score in words, e.g. "diverged at #13: expected human_gate_resolved (score),
    got step_started (draft)"."""
    if fork.status == ForkStatus.WAITING:
        return "stopped at a gate nobody decided: it waits for a reviewer, like its source"
    divergence = fork.divergence
    if divergence:
        kind = divergence.get("kind")
        at = divergence.get("sourceSeq")
        if kind == "extra":
            return (
                f"went on past the source at #{at}: the source has no event there, the replay has "
                + _event_words(divergence.get("replay"))
            )
        if kind == "missing":
            return f"ended before the source's #{at}: expected {_event_words(divergence.get('original'))}"
        return (
            f"diverged at #{at}: expected {_event_words(divergence.get('original'))}, "
            f"got {_event_words(divergence.get('replay'))}"
        )
    if first is not None:
        return f"ended before the source's #{first}: the source recorded more than the replay produced"
    if not finished:
        return "still running: only the events produced so far are compared"
    return "every event the source recorded after the fork point was produced again"


def forks_of(workspace: Workspace, run: Run) -> list[RunFork]:
    return list(
        RunFork.objects.filter(Q(source=run) | Q(source_run_id=run.run_id), run__workspace=workspace)
        .select_related("run")
        .order_by("created_at")
    )
