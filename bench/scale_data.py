"""The runs of bench_scale, made through the actions or written in bulk with COPY (issue 29).

Import after ``django.setup()``. Two ways to make run ``i`` of a workspace (template ``i % 8``,
run id ``run_<prefix><i>``, started ``newest - i * spacing``), meant to store the same rows:

- :func:`make_run` goes through the actions (do_start_run, do_command, do_append_events: a
  cancel, a wait at the review gate or neither, by template) with the clock fixed at the run's
  start and event ids numbered per run (``<prefix>_<run id>_<n>``), so a run's rows depend on its
  index alone;
- :func:`copy_runs` writes the rows with PostgreSQL ``COPY``: each template run is made once with
  :func:`make_run` and read back in COPY text (``COPY (SELECT ...) TO STDOUT``, every column as the
  write path stored it), and each run of the workspace is its template's text with the run id, the
  start time and the row ids replaced, byte for byte (event bodies keep their exact protocol
  JSON, hence their canonical bytes and hashes). The rollups (CostRollup, RunRollup) are the
  template's own (runs.actions.rollups.recompute_runs, what the write path adds for that run)
  moved to each run's start day and shard and summed, written once per key.

tests/storage/test_scale_build.py is the equivalence check: 48 runs (6 of each template) through
the actions and the same 48 through COPY store equal run rows (every column but the surrogate key and the wall-clock
``created_at``/``updated_at``/``recorded_at``), equal events (bodies byte for byte, canonical
sha256 of each), rollups equal to each other and to a recomputation from the events, and the
inbox and search pages list the same runs.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from unittest import mock

from django.db import connection, transaction

from runs import actions
from runs.actions import core, rollup_labels, rollup_metrics
from runs.actions import rollups as rollup_actions
from runs.engine import commands as c
from runs.models import Event, Run, Workspace

WORKFLOW = {
    "id": "wf-scale",
    "version": 1,
    "title": "Scale workflow",
    "steps": [{"id": "draft", "gatePolicy": "AUTO"}, {"id": "review", "gatePolicy": "PAUSE_BEFORE"}],
    "edges": [{"id": "e1", "from": "draft", "to": "review"}],
}
MODELS = [("openai", "gpt-4.1-mini"), ("anthropic", "claude-haiku-4-5"), ("openai", "gpt-4.1")]
TEMPLATES = 8
# the templates' start: a time no run of a workspace holds, so replacing it is exact
TEMPLATE_START = datetime(2001, 2, 3, 4, 5, 6, 789000, tzinfo=UTC)
# the wall-clock columns a clone gets (the actions write now(): they are not compared)
_NOW = "@NOW@"
_PK = "@PK@"
_STARTED = "@STARTED@"


def stamp(moment: datetime) -> str:
    """A protocol timestamp, as runs.protocol.values.now_iso prints one."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def run_id_of(prefix: str, i: int) -> str:
    return f"run_{prefix}{i:010d}"


def start_of(i: int, newest: datetime, spacing: float) -> datetime:
    """Run i's start, to the millisecond (what a protocol timestamp holds)."""
    moment = newest - timedelta(seconds=i * spacing)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


@contextmanager
def fixed_clock(moment: datetime, run_id: str) -> Iterator[None]:
    """The actions' clock stopped at ``moment`` and their ids numbered per run."""
    counter = itertools.count()
    ts = stamp(moment)
    with (
        mock.patch.object(core, "now_iso", lambda: ts),
        mock.patch.object(core, "new_id", lambda prefix: f"{prefix}_{run_id}_{next(counter):03d}"),
    ):
        yield


def calls(run_id: str, t: int, ts: str) -> list[dict]:
    """Five priced model calls (request + response) with words to search for."""
    events = []
    provider, model = MODELS[t % len(MODELS)]
    for n in range(5):
        common = {"runId": run_id, "ts": ts, "type": "model_io", "provider": provider, "model": model}
        events.append(
            {
                **common,
                "id": f"evt_{run_id}_q{n}",
                "direction": "request",
                "stepId": "draft",
                "payload": {"prompt": f"summarise invoice {t * 100 + n} for tenant acme-{t}"},
            }
        )
        events.append(
            {
                **common,
                "id": f"evt_{run_id}_a{n}",
                "direction": "response",
                "stepId": "draft",
                "summary": f"invoice {t * 100 + n} totals {n * 17} euros",
                "usage": {"inputTokens": 900 + t, "outputTokens": 100 + n},
                "cost": {"amount": 0.0012 + t / 10000, "currency": "USD"},
                "durationMs": 300 + n,
            }
        )
    return events


def make_run(workspace: Workspace, t: int, run_id: str, started: datetime) -> Run:
    """Run of template ``t`` through the actions, its clock at ``started``."""
    with fixed_clock(started, run_id):
        actions.do_start_run(
            workspace=workspace,
            workflow=WORKFLOW,
            actor="bench",
            run_id=run_id,
            subject={"userId": f"u-{t % 3}", "tenantId": f"acme-{t % 2}"},
            tags=["scale", f"t{t}"],
        )
        actions.do_command(
            workspace=workspace, run_id=run_id, command=c.BeginStep(step_id="draft"), actor="bench"
        )
        actions.do_append_events(workspace=workspace, run_id=run_id, events=calls(run_id, t, stamp(started)))
        if t % 4 == 0:  # a quarter wait at the review gate (the inbox)
            actions.do_command(
                workspace=workspace, run_id=run_id, command=c.CompleteStep(step_id="draft"), actor="bench"
            )
        elif t % 4 == 1:
            actions.do_command(
                workspace=workspace, run_id=run_id, command=c.CancelRun(reason="bench"), actor="bench"
            )
    return Run.objects.by_run_id(workspace, run_id).get()


def make_runs(workspace: Workspace, count: int, newest: datetime, spacing: float, prefix: str) -> None:
    """``count`` runs through the actions (the reference :func:`copy_runs` is checked against)."""
    for i in range(count):
        make_run(workspace, i % TEMPLATES, run_id_of(prefix, i), start_of(i, newest, spacing))


def _columns(model) -> list[str]:
    return [f.column for f in model._meta.local_concrete_fields if f.column != "id"]


RUN_COLUMNS = ["id", *_columns(Run)]
EVENT_COLUMNS = _columns(Event)


def _select(columns: list[str], special: dict[str, str]) -> str:
    return ", ".join(special.get(col, col) for col in columns)


@dataclass
class Template:
    run: Run
    run_text: str  # the run row in COPY text, with placeholders for its key and times
    events_text: str  # its events, likewise
    events: int
    costs: dict
    counts: dict
    metrics: dict = field(default_factory=dict)  # its own dashboard metrics (RunMetricRollup)
    latency: tuple | None = None  # its duration's bucket (MetricRollup run_latency), when ended


def make_templates(workspace: Workspace) -> list[Template]:
    """The template runs (through the actions) and their rows in COPY text."""
    out = []
    for t in range(TEMPLATES):
        run = make_run(workspace, t, run_id_of(f"tpl{t:02d}_", 0), TEMPLATE_START)
        run_sql = _select(
            RUN_COLUMNS,
            {
                "id": f"'{_PK}'",
                "workspace_id": "'@WS@'",
                "started_at": f"'{_STARTED}'",
                "ended_at": f"CASE WHEN ended_at IS NULL THEN NULL ELSE '{_STARTED}' END",
                "created_at": f"'{_NOW}'",
                "updated_at": f"'{_NOW}'",
            },
        )
        event_sql = _select(EVENT_COLUMNS, {"run_id": f"'{_PK}'", "recorded_at": f"'{_NOW}'"})
        with connection.cursor() as cursor:
            raw = cursor.cursor
            with raw.copy(f"COPY (SELECT {run_sql} FROM runs_run WHERE id = {run.pk:d}) TO STDOUT") as copy:
                run_text = b"".join(bytes(b) for b in copy).decode()
            with raw.copy(
                f"COPY (SELECT {event_sql} FROM runs_event WHERE run_id = {run.pk:d} ORDER BY seq) TO STDOUT"
            ) as copy:
                events_text = b"".join(bytes(b) for b in copy).decode()
        assert stamp(TEMPLATE_START) in run_text
        costs, counts = rollup_actions.recompute_runs([run])
        metrics = rollup_metrics.recompute_run_metrics(run)
        latency = rollup_actions.run_marks(run)[1]
        out.append(
            Template(run, run_text, events_text, events_text.count("\n"), costs, counts, metrics, latency)
        )
    return out


def _bulk_indexes(table: str) -> list[tuple[str, str]]:
    """(name, definition) of the table's indexes that back no constraint."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index"
            " WHERE indrelid = %s::regclass AND NOT EXISTS"
            " (SELECT 1 FROM pg_constraint WHERE conindid = indexrelid) ORDER BY indexrelid",
            [table],
        )
        # a partitioned table's (runs_event on PostgreSQL): made again on every partition, not ONLY
        return [(name, definition.replace(" ON ONLY ", " ON ", 1)) for name, definition in cursor.fetchall()]


@contextmanager
def bulk_load(log=print) -> Iterator[None]:
    """For a big build: the secondary indexes of runs_run and runs_event dropped during the COPY and
    made again after it (one sorted build instead of 10M insertions each), foreign-key triggers off
    (the rows are consistent by construction: a chunk's runs are copied before their events)."""
    dropped = [*_bulk_indexes("runs_run"), *_bulk_indexes("runs_event")]
    with connection.cursor() as cursor:
        for name, _ in dropped:
            cursor.execute(f"DROP INDEX {name}")
        cursor.execute("SET session_replication_role = replica")
        cursor.execute("SET synchronous_commit = off")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET session_replication_role = DEFAULT")
            cursor.execute("SET maintenance_work_mem = '1GB'")
            cursor.execute("SET max_parallel_maintenance_workers = 2")
            for name, definition in dropped:
                t0 = time.perf_counter()
                cursor.execute(definition)
                log(f"  index {name} made again in {time.perf_counter() - t0:.0f} s")


def copy_runs(
    workspace: Workspace,
    count: int,
    templates: list[Template],
    newest: datetime,
    spacing: float,
    prefix: str,
    *,
    chunk: int = 5000,
    log=print,
) -> int:
    """Runs ``0..count-1`` of :func:`make_runs`, written with COPY from the templates (see the module
    docstring), their rollups added; one transaction per chunk of runs. Returns the events written."""
    old_start = stamp(TEMPLATE_START)
    now = datetime.now(UTC).isoformat()
    with connection.cursor() as cursor:
        cursor.execute("SELECT COALESCE(MAX(id), 0) FROM runs_run")
        first_pk = cursor.fetchone()[0] + 1
    t0 = time.perf_counter()
    per_key: Counter = Counter()  # (template, day, shard) -> runs
    events = 0
    for start in range(0, count, chunk):
        run_parts, event_parts = [], []
        own: dict[int, dict] = {}  # each clone's own rollup rows (RunCostRollup)
        metrics: dict[int, tuple] = {}  # each clone's dashboard metrics, and its duration's bucket
        latencies: dict[int, tuple] = {}
        for i in range(start, min(count, start + chunk)):
            t = i % TEMPLATES
            tpl = templates[t]
            pk = first_pk + i
            started = start_of(i, newest, spacing)
            new_id, new_start = run_id_of(prefix, i), stamp(started)
            old_id = tpl.run.run_id
            run_parts.append(
                tpl.run_text.replace(_PK, str(pk))
                .replace("@WS@", str(workspace.pk))
                .replace(_STARTED, started.isoformat())
                .replace(_NOW, now)
                .replace(old_id, new_id)
                .replace(old_start, new_start)
            )
            event_parts.append(
                tpl.events_text.replace(_PK, str(pk))
                .replace(_NOW, now)
                .replace(old_id, new_id)
                .replace(old_start, new_start)
            )
            per_key[(t, started.date(), pk % rollup_labels.ROLLUP_SHARDS)] += 1
            own[pk] = clone_calls(tpl, started.date())
            clone = Run(pk=pk, workspace_id=workspace.pk, started_at=started, workflow_id=tpl.run.workflow_id,
                        subject=tpl.run.subject)  # fmt: skip
            if tpl.metrics:
                metrics[pk] = (clone, tpl.metrics)
            if tpl.latency is not None:
                latencies[pk] = (clone, {tpl.latency: 1})
            events += tpl.events
        with transaction.atomic(), connection.cursor() as cursor:
            raw = cursor.cursor
            with raw.copy(f"COPY runs_run ({', '.join(RUN_COLUMNS)}) FROM STDIN") as copy:
                copy.write("".join(run_parts))
            with raw.copy(f"COPY runs_event ({', '.join(EVENT_COLUMNS)}) FROM STDIN") as copy:
                copy.write("".join(event_parts))
            rollup_actions.apply_run_deltas(own)
            rollup_metrics.count_cloned_metrics(metrics, latencies)
        if count > chunk:
            log(f"  {workspace.slug}: {start + len(run_parts):,} runs ({time.perf_counter() - t0:.0f} s)")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence('runs_run', 'id'), (SELECT MAX(id) FROM runs_run))"
        )
    with transaction.atomic():
        costs, counts = clone_rollups(templates, per_key)
        rollup_actions.write(workspace.pk, costs, counts)
    return events


def clone_calls(tpl: Template, day) -> dict:
    """A clone's own rollup deltas: its template's, moved to the clone's start day (its calls are
    stamped with it); the run-level labels of a key do not enter the per-run rows."""
    return {(day, 0, day.isoformat(), *key[3:]): list(sums) for key, sums in tpl.costs.items()}


def clone_rollups(templates: list[Template], per_key: Counter) -> tuple[dict, dict]:
    """The rollups of the clones: each template's own, moved to the clone's start day (run day and
    call day: a clone's calls are stamped with its start) and shard, times the clones there."""
    costs: dict = {}
    counts: dict = {}
    for (t, day, shard), n in sorted(per_key.items()):
        tpl = templates[t]
        for key, sums in tpl.costs.items():
            assert key[2] == stamp(TEMPLATE_START)[:10]
            moved = (day, shard, day.isoformat(), *key[3:])
            held = costs.setdefault(moved, [0] * 6 + [Decimal(0)] * 2)
            for k, value in enumerate(sums):
                held[k] += value * n
        for (_, workflow, version, _shard), vector in tpl.counts.items():
            held = counts.setdefault((day, workflow, version, shard), [0] * len(vector))
            for k, value in enumerate(vector):
                held[k] += value * n
    return costs, counts
