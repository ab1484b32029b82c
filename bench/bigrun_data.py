"""One run of ten million events (issue 29), made through the actions or copied in bulk.

Import after ``django.setup()`` on PostgreSQL. The run (run id :data:`RUN_ID`) is

- a **head**, through the actions: the run starts (workflow ingest -> work -> review, the review
  step ``PAUSE_BEFORE``), step ``ingest`` runs (an artifact, a tool call) and completes, step
  ``work`` begins, a root span ``batch`` opens and an artifact ``progress`` is written;
- ``blocks`` **blocks** of :data:`BLOCK` events each, block ``i`` (1-based) made by
  :func:`block_events`: 16 items, each a child span of ``batch`` holding a priced model call
  (request + response with usage and cost), a tool call and a stream chunk, one item in 16 ending
  in error; plus an annotation, a non-fatal error, two stream chunks; every id and span id of the
  block carries ``b<i:07d>`` and every event of it the timestamp ``T0 + i * 600 ms``;
- a **tail**, through the actions: the root span ends, an artifact ``report`` is written and step
  ``work`` completes, so the run waits at the review gate (a pending ``human_gate_requested``).

:func:`make_run` writes all of it through the actions (do_start_run, do_command,
do_append_events; the clock fixed, ids numbered per run). :func:`copy_run` writes the head and
the tail through the actions too, but the blocks by one ``INSERT ... SELECT`` from a template:
block 1 of a template run made by :func:`make_run` (the rows exactly as the append path stored
them), repeated with ``generate_series`` with ``seq`` shifted by ``(i - 1) * BLOCK`` and the
block's marker ``b0000001`` and timestamp replaced in ``event_id``, ``correlation_id``,
``span_ref``, ``ts`` and ``body`` (the body keeps the exact protocol JSON: only those substrings,
of equal length, change). Then one pass over the copied events in seq order (a server-side cursor)
does what the append path does beside the rows: the engine's ``apply_event`` on the head's state,
a RunSnapshot every ``WORKBENCH_SNAPSHOT_INTERVAL`` events, the model calls added to the cost
rollups (``rollups.count_model_calls``); the projection is set from that state
(``set_projection``) before the tail goes through the actions.

Equivalence (:func:`compare`, run by the bench at build time and by
tests/storage/test_bigrun_build.py): a run of ``n`` blocks made by :func:`make_run` and one made
by :func:`copy_run` store equal run rows (every column but keys and wall-clock times), equal
events (every column, bodies byte for byte), equal snapshots, artifact versions and cost rollups,
and their exported bundles are byte-identical and verify. What the copy does not do: fill the
response cache with the blocks' model responses (replays of the big run would call the model
again for those); nothing the pages read.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from unittest import mock

from django.conf import settings
from django.db import connection, transaction

from runs import actions
from runs.actions import core, rollup_metrics
from runs.actions import rollups as rollup_actions
from runs.engine import commands as c
from runs.engine.fold import apply_event
from runs.models import ArtifactVersion, CostRollup, Event, Run, RunSnapshot, Workspace
from runs.protocol.values import dumps, loads

RUN_ID = "run_bigrun"
BLOCK = 100  # events per block
ITEMS = 16  # items (child spans) per block
T0 = datetime(2026, 11, 2, 0, 10, 0, tzinfo=UTC)
MARK = "b0000001"  # block 1's marker in ids
WORKFLOW = {
    "id": "wf-bigrun",
    "version": 1,
    "title": "Ten-million-event batch",
    "steps": [
        {"id": "ingest", "gatePolicy": "AUTO"},
        {"id": "work", "gatePolicy": "AUTO"},
        {"id": "review", "gatePolicy": "PAUSE_BEFORE"},
    ],
    "edges": [{"id": "e1", "from": "ingest", "to": "work"}, {"id": "e2", "from": "work", "to": "review"}],
}


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def block_ts(i: int) -> str:
    return stamp(T0 + timedelta(milliseconds=600 * i))


@contextmanager
def fixed_clock(moment: datetime, tag: str) -> Iterator[None]:
    """The actions' clock stopped at ``moment``; ids they make numbered under ``tag``."""
    counter = itertools.count()
    ts = stamp(moment)
    with (
        mock.patch.object(core, "now_iso", lambda: ts),
        mock.patch.object(core, "new_id", lambda prefix: f"{prefix}_{RUN_ID}_{tag}{next(counter):03d}"),
    ):
        yield


def _artifact(key: str, ts: str, data: dict) -> dict:
    return {"artifactKey": key, "typeId": "json", "version": 1, "createdAt": ts, "data": data}


def block_events(i: int) -> list[dict]:
    """Block ``i``: :data:`BLOCK` events (see the module docstring)."""
    b, ts = f"b{i:07d}", block_ts(i)
    base = {"runId": RUN_ID, "ts": ts, "stepId": "work"}
    events: list[dict] = []
    for n in range(ITEMS):
        span, corr = f"sp_{b}_{n:02d}", f"c_{b}_{n:02d}"
        call = {
            **base,
            "type": "model_io",
            "provider": "openai",
            "model": "gpt-4.1-mini",
            "correlationId": corr,
        }
        failed = n == 7
        events += [
            {**base, "id": f"e_{b}_{n:02d}a", "type": "span_started", "spanId": span, "parentSpanId": "batch",
             "name": f"item {b}-{n:02d}", "kind": "internal"},
            {**call, "id": f"e_{b}_{n:02d}b", "direction": "request",
             "payload": {"prompt": f"classify record {b}-{n:02d} of the nightly batch"}},
            {**call, "id": f"e_{b}_{n:02d}c", "direction": "stream_chunk", "payload": {"delta": "label: "}},
            {**call, "id": f"e_{b}_{n:02d}d", "direction": "response",
             "summary": f"record {b}-{n:02d}: label {n % 5}",
             "usage": {"inputTokens": 410 + n, "outputTokens": 12 + n % 3, "totalTokens": 422 + n + n % 3},
             "cost": {"amount": 0.000172 + n / 1_000_000, "currency": "USD"}, "durationMs": 240 + n},
            {**base, "id": f"e_{b}_{n:02d}e", "type": "tool_call", "name": "lookup",
             "args": {"record": f"{b}-{n:02d}"}, "result": {"found": n % 4 != 0}},
            {**base, "id": f"e_{b}_{n:02d}f", "type": "span_ended", "spanId": span,
             "status": "error" if failed else "ok", "durationMs": 260 + n,
             **({"error": {"message": "lookup timed out", "code": "TIMEOUT"}} if failed else {})},
        ]  # fmt: skip
    events += [
        {**base, "id": f"e_{b}_x0", "type": "annotation", "text": f"block {b} done", "tags": ["batch"]},
        {
            **base,
            "id": f"e_{b}_x1",
            "type": "error",
            "message": f"record {b}-07 retried later",
            "fatal": False,
        },
        {
            **base,
            "id": f"e_{b}_x2",
            "type": "model_io",
            "direction": "stream_chunk",
            "payload": {"delta": "."},
        },
        {
            **base,
            "id": f"e_{b}_x3",
            "type": "model_io",
            "direction": "stream_chunk",
            "payload": {"delta": ".."},
        },
    ]
    assert len(events) == BLOCK
    return events


def _head(workspace: Workspace) -> None:
    ts = stamp(T0)
    with fixed_clock(T0, "h"):
        actions.do_start_run(
            workspace=workspace,
            workflow=WORKFLOW,
            actor="bench",
            run_id=RUN_ID,
            subject={"userId": "u-batch", "tenantId": "acme"},
            tags=["bigrun", "batch"],
        )
        act = {"workspace": workspace, "run_id": RUN_ID, "actor": "bench"}
        actions.do_command(**act, command=c.BeginStep(step_id="ingest"))
        base = {"runId": RUN_ID, "ts": ts, "stepId": "ingest"}
        actions.do_append_events(
            **act,
            events=[
                {**base, "id": "e_head_0", "type": "tool_call", "name": "fetch", "args": {"day": "2026-11-01"}},
                {**base, "id": "e_head_1", "type": "artifact_written",
                 "artifact": _artifact("manifest", ts, {"records": 1_600_000})},
            ],
        )  # fmt: skip
        actions.do_command(**act, command=c.CompleteStep(step_id="ingest"))
        actions.do_command(**act, command=c.BeginStep(step_id="work"))
        base = {"runId": RUN_ID, "ts": ts, "stepId": "work"}
        actions.do_append_events(
            **act,
            events=[
                {**base, "id": "e_head_2", "type": "span_started", "spanId": "batch", "name": "nightly batch"},
                {**base, "id": "e_head_3", "type": "artifact_written",
                 "artifact": _artifact("progress", ts, {"done": 0})},
            ],
        )  # fmt: skip


def _tail(workspace: Workspace, blocks: int) -> None:
    end = T0 + timedelta(milliseconds=600 * (blocks + 1))
    ts = stamp(end)
    base = {"runId": RUN_ID, "ts": ts, "stepId": "work"}
    with fixed_clock(end, "t"):
        act = {"workspace": workspace, "run_id": RUN_ID, "actor": "bench"}
        actions.do_append_events(
            **act,
            events=[
                {**base, "id": "e_tail_0", "type": "span_ended", "spanId": "batch", "status": "ok"},
                {**base, "id": "e_tail_1", "type": "artifact_written",
                 "artifact": _artifact("report", ts, {"records": blocks * ITEMS, "failed": blocks})},
            ],
        )  # fmt: skip
        actions.do_command(**act, command=c.CompleteStep(step_id="work"))


def make_run(workspace: Workspace, blocks: int) -> Run:
    """The whole run through the actions (the reference :func:`copy_run` is checked against)."""
    _head(workspace)
    for i in range(1, blocks + 1):
        with fixed_clock(T0, f"b{i}_"):
            actions.do_append_events(
                workspace=workspace, run_id=RUN_ID, events=block_events(i), actor="bench"
            )
    _tail(workspace, blocks)
    return Run.objects.by_run_id(workspace, RUN_ID).get()


def _columns() -> list[str]:
    return [f.column for f in Event._meta.local_concrete_fields]


def copy_blocks(template: Run, run: Run, first: int, last: int) -> None:
    """Blocks ``first..last`` of ``run``: the template's block 1, repeated in SQL."""
    head_seq = run.last_seq  # the head's events; block i starts at head_seq + (i - 1) * BLOCK + 1
    t_first = template_head_seq(template) + 1
    cols = _columns()
    mark = "'b' || lpad(g::text, 7, '0')"
    ts = (
        "to_char((%(t0)s::timestamptz + g * interval '600 milliseconds') AT TIME ZONE 'UTC',"
        ' \'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"\')'
    )
    special = {
        "run_id": "%(run)s",
        "seq": f"e.seq - {t_first} + {head_seq + 1} + (g - 1) * {BLOCK}",
        "event_id": f"replace(e.event_id, '{MARK}', {mark})",
        "correlation_id": f"replace(e.correlation_id, '{MARK}', {mark})",
        "span_ref": f"replace(e.span_ref, '{MARK}', {mark})",
        "ts": ts,
        "body": f"replace(replace(e.body, '{MARK}', {mark}), %(ts1)s, {ts})",
        "recorded_at": "now()",
    }
    select = ", ".join(special.get(col, f"e.{col}") for col in cols)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO runs_event ({', '.join(cols)}) SELECT {select}"
            " FROM generate_series(%(first)s, %(last)s) AS g"
            " CROSS JOIN (SELECT * FROM runs_event WHERE run_id = %(tpl)s AND seq BETWEEN %(lo)s AND %(hi)s) e"
            " ORDER BY g, e.seq",
            {
                "run": run.pk,
                "tpl": template.pk,
                "lo": t_first,
                "hi": t_first + BLOCK - 1,
                "first": first,
                "last": last,
                "t0": T0.isoformat(),
                "ts1": block_ts(1),
            },
        )


def template_head_seq(template: Run) -> int:
    """Seq of the template's last head event (the head is the same in every run)."""
    return Event.objects.filter(run=template, event_id="e_head_3").values_list("seq", flat=True).get()


def _replay(run: Run, after: int, log) -> None:
    """What the append path does beside the rows, for the copied events: fold, snapshots, rollups."""
    state = core.load_state(run)
    interval = settings.WORKBENCH_SNAPSHOT_INTERVAL
    snapshots: list[RunSnapshot] = []
    calls: list[dict] = []
    seq = after
    t0 = time.perf_counter()
    with connection.connection.cursor(name="bigrun_replay") as cursor:
        cursor.itersize = 20_000
        cursor.execute(
            "SELECT seq, body FROM runs_event WHERE run_id = %s AND seq > %s ORDER BY seq", [run.pk, after]
        )
        for seq, body in cursor:
            event = loads(body)
            apply_event(state, event)
            if core.is_error_event(event):  # as Appender.record counts them (the runs list's errors)
                run.error_count += 1
            if seq % interval == 0:
                snapshots.append(RunSnapshot(run=run, seq=seq, state=dumps(state.to_json())))
            if event["type"] == "model_io" and event.get("direction") == "response":
                calls.append(event)
            if len(calls) >= 50_000:
                rollup_actions.count_model_calls(run, calls)
                rollup_metrics.count_metrics(run, calls, [])  # the dashboard's model latencies
                calls = []
            if seq % 1_000_000 == 0:
                log(f"  replayed to seq {seq:,} ({time.perf_counter() - t0:.0f} s)")
    rollup_actions.count_model_calls(run, calls)
    rollup_metrics.count_metrics(run, calls, [])
    RunSnapshot.objects.bulk_create(snapshots, batch_size=1000)
    core.set_projection(run, state)
    run.last_seq = seq
    run.save()


def copy_run(workspace: Workspace, template: Run, blocks: int, *, chunk: int = 10_000, log=print) -> Run:
    """The run of :func:`make_run` with its blocks copied from ``template`` (see the docstring)."""
    _head(workspace)
    run = Run.objects.by_run_id(workspace, RUN_ID).get()
    after = run.last_seq
    t0 = time.perf_counter()
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        for first in range(1, blocks + 1, chunk):
            last = min(blocks, first + chunk - 1)
            copy_blocks(template, run, first, last)
            if blocks > chunk:
                log(f"  copied blocks {first:,}..{last:,} ({time.perf_counter() - t0:.0f} s)")
        run.last_seq = after + blocks * BLOCK
        _replay(run, after, log)
    _tail(workspace, blocks)
    return Run.objects.by_run_id(workspace, RUN_ID).get()


# --- the equivalence check -------------------------------------------------------------------

_WALL = {"id", "workspace_id", "created_at", "updated_at"}


def _run_row(run: Run) -> dict:
    row = Run.unscoped.filter(pk=run.pk).values().get()
    return {k: v for k, v in row.items() if k not in _WALL}


def _events(run: Run) -> list[tuple]:
    cols = [c for c in _columns() if c not in {"run_id", "recorded_at"}]
    return list(Event.objects.filter(run=run).order_by("seq").values_list(*cols))


def _rollups(workspace: Workspace) -> list[tuple]:
    fields = [
        f.name
        for f in CostRollup._meta.local_concrete_fields
        if f.name not in {"id", "workspace", "key_hash", "shard"}
    ]
    return sorted(CostRollup.objects.filter(workspace=workspace).exclude(calls=0).values_list(*fields))


def compare(made: Run, copied: Run) -> list[str]:
    """What differs between a run made through the actions and its copy ([] when equal)."""
    from runs.protocol.bundle import check_bundle
    from runs.selectors.bundles import export_bundle_bytes

    problems = []
    if _run_row(made) != _run_row(copied):
        a, b = _run_row(made), _run_row(copied)
        problems.append(f"run rows differ in {[k for k in a if a[k] != b[k]]}")
    if _events(made) != _events(copied):
        problems.append("events differ")
    snaps = [
        list(RunSnapshot.objects.filter(run=r).order_by("seq").values_list("seq", "state"))
        for r in (made, copied)
    ]
    if snaps[0] != snaps[1]:
        problems.append("snapshots differ")
    versions = [
        list(
            ArtifactVersion.objects.filter(run=r)
            .order_by("key", "version")
            .values_list("key", "version", "seq", "body")
        )
        for r in (made, copied)
    ]
    if versions[0] != versions[1]:
        problems.append("artifact versions differ")
    if _rollups(made.workspace) != _rollups(copied.workspace):
        problems.append("cost rollups differ")
    if rollup_actions.stored_run_calls(made) != rollup_actions.stored_run_calls(copied):
        problems.append("the runs' own cost rollups differ")
    exported = [export_bundle_bytes(r) for r in (made, copied)]
    if exported[0] != exported[1]:
        problems.append("exported bundles differ")
    if not check_bundle(exported[1]).ok:
        problems.append("the copy's bundle does not verify")
    if not actions.projection_matches_fold(copied):
        problems.append("the copy's projection is not the fold of its events")
    return problems
