"""OTLP ingest batched per request (issue 31's throughput): the runs one request creates are
stored together (one insert of run rows, trace rows and events, one notification), with the
same results as one run at a time: transcripts written and indexed, a span the engine refuses
dropped on its own, a run created meanwhile by another request found and appended to, and
ingested model calls kept out of the response cache."""

from __future__ import annotations

from base64 import urlsafe_b64decode

import pytest
from orjson import loads as jloads

from runs.actions import otlp as otlp_actions
from runs.actions.otlp import do_ingest_spans
from runs.models import CachedResponse, Event, OtelTrace, Run
from runs.protocol.otlp_semconv_in import span_key
from runs.protocol.values import loads
from runs.telemetry.transcript_log import transcript_dir, transcript_path

pytestmark = pytest.mark.django_db(transaction=True)

T0 = 1_767_225_600_000_000_000


def trace_id(n: int) -> str:
    return f"{n + 1:032x}"


def span(
    trace: int, n: int, *, parent: int | None = 0, name: str = "step", attrs: dict | None = None
) -> dict:
    return {
        "traceId": trace_id(trace),
        "spanId": f"{trace * 100 + n + 1:016x}",
        "parentSpanId": None if parent is None else f"{trace * 100 + parent + 1:016x}",
        "name": name,
        "kind": 1,
        "start": T0 + n * 1_000_000,
        "end": T0 + n * 1_000_000 + 500_000,
        "attributes": attrs or {},
        "status": 1,
        "statusMessage": None,
        "events": [],
        "resource": {"service.name": "batch-app"},
    }


CHAT = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]',
    "gen_ai.usage.input_tokens": 100,
    "gen_ai.usage.output_tokens": 20,
}


def a_trace(trace: int) -> list[dict]:
    return [
        span(trace, 1, name="chat gpt-4o-mini", attrs=CHAT),
        span(trace, 2),
        span(trace, 0, parent=None, name="request"),
    ]


def run_of(workspace, trace: int) -> Run:
    return OtelTrace.objects.get(workspace=workspace, trace_id=trace_id(trace)).run


def bodies(run: Run) -> list[dict]:
    return [loads(b) for b in Event.objects.filter(run=run).order_by("seq").values_list("body", flat=True)]


def test_one_request_creates_many_runs_each_complete_with_its_transcript(workspace, settings):
    settings.WORKBENCH_TRANSCRIPTS_OF_TRACES = "live"  # written as the spans come (else on first read)
    spans = [s for t in range(5) for s in a_trace(t)]
    report = do_ingest_spans(workspace=workspace, spans=spans)
    assert (report.accepted, report.rejected) == (15, 0)
    assert len(report.created) == 5 and sorted(report.run_ids) == sorted(report.created)
    index = [jloads(line) for line in (transcript_dir() / "index.jsonl").read_bytes().splitlines()]
    for t in range(5):
        run = run_of(workspace, t)
        events = bodies(run)
        assert run.last_seq == len(events) == run.event_count == run.revision
        assert [e["type"] for e in events].count("span_started") == 3
        assert run.model_calls == 1 and run.total_tokens == 120 and run.cost_totals  # priced on ingest
        assert run.title == "request (batch-app)" and "service:batch-app" in run.tags
        lines = [jloads(line) for line in transcript_path(run).read_bytes().splitlines()]
        assert lines[0]["type"] == "run.started" and lines[-1]["event_seq"] == run.last_seq
        assert sum(1 for e in index if e["run_id"] == run.run_id) == 1
    assert not CachedResponse.objects.exists()  # an instrumentation's request is not one a replay sends


def test_a_span_sent_twice_in_one_request_is_stored_once(workspace):
    """As an exporter's retry in a later request: accepted, nothing stored twice, and the first
    copy is kept (the engine would refuse the second copy's span_started: already open)."""
    spans = a_trace(0) + a_trace(1)
    spans.append(dict(spans[1]))
    report = do_ingest_spans(workspace=workspace, spans=spans)
    assert (report.accepted, report.rejected) == (7, 0)
    assert [e["type"] for e in bodies(run_of(workspace, 0))].count("span_started") == 3
    assert [e["type"] for e in bodies(run_of(workspace, 1))].count("span_started") == 3


def test_a_span_the_engine_refuses_is_refused_alone(workspace, monkeypatch):
    """A span of a new run that the engine refuses is dropped and counted; the run's other spans
    and the other runs of the request land."""
    from runs.engine import check

    real = check.check_event

    def refuse_one(state, event, ctx, *, shape_checked=False):
        if event.get("type") == "span_started" and event.get("name") == "refused":
            raise check.engine_error("INVALID_TRACE_EVENT", "refused here", "name")
        return real(state, event, ctx, shape_checked=shape_checked)

    monkeypatch.setattr(check, "check_event", refuse_one)
    spans = a_trace(0) + a_trace(1)
    spans[1] = {**spans[1], "name": "refused"}
    report = do_ingest_spans(workspace=workspace, spans=spans)
    assert (report.accepted, report.rejected) == (5, 1) and "refused here" in report.message
    assert [e["type"] for e in bodies(run_of(workspace, 0))].count("span_started") == 2
    assert [e["type"] for e in bodies(run_of(workspace, 1))].count("span_started") == 3


def test_a_span_naming_an_unknown_run_is_refused_alone(workspace):
    """One span of a trace names a run the workspace lacks: that span is refused, and its trace's
    other spans (which would follow the run it names) go to the trace's own run (issue 54)."""
    spans = a_trace(0)
    spans[0] = {**spans[0], "attributes": {**spans[0]["attributes"], "workbench.run.id": "run_nowhere"}}
    report = do_ingest_spans(workspace=workspace, spans=spans)
    assert (report.accepted, report.rejected) == (2, 1), report.message
    assert "run_nowhere" in report.message
    assert [e["type"] for e in bodies(run_of(workspace, 0))].count("span_started") == 2


def test_a_trace_whose_run_appeared_meanwhile_is_appended_to(workspace, monkeypatch):
    """Another request created the trace's run between our lookup and our insert: the batch rolls
    back and each run goes one at a time, the late trace onto the run that exists."""
    first = do_ingest_spans(workspace=workspace, spans=a_trace(0)[:1])
    existing = run_of(workspace, 0)
    monkeypatch.setattr(otlp_actions, "_known_traces", lambda workspace, trace_ids: {})  # the lookup misses
    report = do_ingest_spans(workspace=workspace, spans=a_trace(0)[1:] + a_trace(1))
    assert report.rejected == 0 and report.accepted == 5
    assert Run.objects.filter(workspace=workspace).count() == 2
    assert run_of(workspace, 0).pk == existing.pk and first.created == [existing.run_id]
    assert [e["type"] for e in bodies(existing)].count("span_started") == 3
    assert [e["type"] for e in bodies(run_of(workspace, 1))].count("span_started") == 3


def test_an_exporter_retry_of_a_whole_request_stores_nothing_twice(workspace):
    spans = [s for t in range(3) for s in a_trace(t)]
    do_ingest_spans(workspace=workspace, spans=spans)
    counts = {t: Event.objects.filter(run=run_of(workspace, t)).count() for t in range(3)}
    again = do_ingest_spans(workspace=workspace, spans=spans)
    assert (again.accepted, again.rejected, again.created) == (9, 0, [])
    assert {t: Event.objects.filter(run=run_of(workspace, t)).count() for t in range(3)} == counts


def test_a_span_stored_under_its_hex_ids_before_issue_53_is_not_stored_again(workspace):
    """Events of OTLP spans are named by the span's trace and span ids in base64url now; a span
    stored under the hex spelling by an older version and exported again is still known."""
    spans = a_trace(0)
    do_ingest_spans(workspace=workspace, spans=spans)
    run = run_of(workspace, 0)
    for row in Event.objects.filter(run=run):
        key = span_key(*legacy_parts(row.event_id))
        assert row.event_id.startswith(f"o{key}_") and len(key) == 32
        Event.objects.filter(run=run, seq=row.seq).update(  # what an older version stored
            event_id="otel_{}_{}".format(*legacy_parts(row.event_id)) + row.event_id[33:]
        )
    count = Event.objects.filter(run=run).count()
    again = do_ingest_spans(workspace=workspace, spans=spans)
    assert (again.accepted, again.rejected, again.created) == (3, 0, [])
    assert Event.objects.filter(run=run).count() == count


def legacy_parts(event_id: str) -> tuple[str, str]:
    """(trace id, span id) in hex of an event id ``o<span_key>_<suffix>``."""
    key = event_id[1:33]
    both = urlsafe_b64decode(key).hex()
    return both[:32], both[32:]


def test_the_root_arriving_later_retitles_the_run_in_its_append(workspace):
    """A run named from a child span is renamed after its root when the root arrives, in the
    root's append (one transaction, no second write of the run); the trace row follows."""
    spans = a_trace(0)
    do_ingest_spans(workspace=workspace, spans=spans[:2])
    assert run_of(workspace, 0).title == "chat gpt-4o-mini (batch-app)"
    report = do_ingest_spans(workspace=workspace, spans=spans[2:])
    run = run_of(workspace, 0)
    assert report.rejected == 0 and run.title == "request (batch-app)"
    assert run.run_doc["metadata"]["workbench.title"] == "request (batch-app)"
    assert OtelTrace.objects.get(workspace=workspace, trace_id=trace_id(0)).title == "request (batch-app)"


def test_a_run_a_person_renamed_keeps_its_name_when_the_root_arrives(workspace):
    from runs.actions.runs import do_set_run_title

    spans = a_trace(0)
    do_ingest_spans(workspace=workspace, spans=spans[:2])
    do_set_run_title(workspace=workspace, run_id=run_of(workspace, 0).run_id, title="mine")
    do_ingest_spans(workspace=workspace, spans=spans[2:])
    assert run_of(workspace, 0).title == "mine"


def test_a_root_sent_again_with_nothing_new_still_retitles(workspace, monkeypatch):
    """The root's spans already stored (say an older server stored them without the rename)
    while the run still bears the child's name: nothing is appended and the run is renamed."""
    spans = a_trace(0)
    do_ingest_spans(workspace=workspace, spans=spans[:2])
    with monkeypatch.context() as patched:
        patched.setattr(otlp_actions, "_titles_due", lambda traces, known: {})
        patched.setattr(otlp_actions, "_touch_traces", lambda *args, **kwargs: None)
        do_ingest_spans(workspace=workspace, spans=spans[2:])
    assert run_of(workspace, 0).title == "chat gpt-4o-mini (batch-app)"
    count = Event.objects.filter(run=run_of(workspace, 0)).count()
    report = do_ingest_spans(workspace=workspace, spans=spans[2:])
    assert report.rejected == 0 and Event.objects.filter(run=run_of(workspace, 0)).count() == count
    assert run_of(workspace, 0).title == "request (batch-app)"


def _trace_row(workspace, trace: int) -> OtelTrace:
    return OtelTrace.objects.get(workspace=workspace, trace_id=trace_id(trace))


def test_a_later_batch_moves_its_traces_clock_in_the_runs_append(workspace):
    """The quiet clock of a trace that already has its run (a span arrived now; its root ended)
    is stored in the transaction of the run's append, not in a commit of its own after it."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    spans = a_trace(0)
    do_ingest_spans(workspace=workspace, spans=spans[:2])
    before = _trace_row(workspace, 0)
    assert (before.root_ended, before.root_status) == (False, "")
    with CaptureQueriesContext(connection) as queries:
        report = do_ingest_spans(workspace=workspace, spans=spans[2:])
    after = _trace_row(workspace, 0)
    assert report.rejected == 0
    assert (after.root_ended, after.root_status, after.title) == (True, "ok", "request (batch-app)")
    assert after.last_span_at > before.last_span_at
    sql = [q["sql"] for q in queries.captured_queries]
    touches = [i for i, q in enumerate(sql) if q.startswith('UPDATE "runs_oteltrace"')]
    inserts = [i for i, q in enumerate(sql) if 'INSERT INTO "runs_event"' in q]
    assert touches and inserts
    begin = max(i for i, q in enumerate(sql[: inserts[0]]) if q.startswith("BEGIN"))
    commit = min(i for i, q in enumerate(sql) if q == "COMMIT" and i > inserts[0])
    assert all(begin < i < commit for i in touches)  # one transaction with the events


def test_a_later_batch_the_run_refuses_still_moves_its_traces_clock(workspace):
    """Spans of a trace whose run has ended are refused, and the trace's clock moves all the
    same (a span arrived), as before the clock moved into the run's append."""
    from runs.actions.runs import do_commands
    from runs.engine import commands as cmd

    spans = a_trace(0)
    do_ingest_spans(workspace=workspace, spans=spans[:2])
    before = _trace_row(workspace, 0)
    do_commands(workspace=workspace, run_id=before.run.run_id, commands=[cmd.CompleteRun(reason="done")])
    report = do_ingest_spans(workspace=workspace, spans=spans[2:])
    after = _trace_row(workspace, 0)
    assert report.rejected == 1 and report.accepted == 0
    assert (after.root_ended, after.root_status) == (True, "ok")
    assert after.last_span_at > before.last_span_at


def test_runs_created_together_equal_runs_created_one_at_a_time(
    workspace, other_workspace, monkeypatch, settings
):
    """The batch path (one insert of run rows, trace rows and events, one rollup write, one
    transcript pass) stores what the one-run-at-a-time path stores: run rows, state, events,
    trace rows, rollups (workspace and per run) and transcript bytes. Same clock and run ids
    on both sides; the one-at-a-time side is the batch's own fallback (its insert made to fail)."""
    from itertools import count

    from django.db import IntegrityError

    from runs.actions import core
    from runs.models_rollups import CostRollup, RunCostRollup, RunRollup

    monkeypatch.setattr(core, "now_iso", lambda: "2026-01-01T00:00:00.000Z")
    settings.WORKBENCH_TRANSCRIPTS_OF_TRACES = "live"  # both paths' live transcript writes compared
    spans = [s for t in range(4) for s in a_trace(t)]
    spans += [span(4, 1, name="orphan")]  # a trace whose root is not in the request

    def ingest(ws, numbers):
        monkeypatch.setattr(otlp_actions, "new_id", lambda prefix: f"{prefix}-{next(numbers)}")
        return do_ingest_spans(workspace=ws, spans=spans)

    together = ingest(workspace, count())

    def refuse(appenders):
        raise IntegrityError("as if another request had created one of these traces' runs")

    monkeypatch.setattr(otlp_actions, "save_new_runs", refuse)
    alone = ingest(other_workspace, count())
    assert (together.accepted, together.rejected, sorted(together.created)) == (
        alone.accepted,
        alone.rejected,
        sorted(alone.created),
    )

    def stored(ws):
        runs = {}
        skip = {"id", "workspace_id", "created_at", "updated_at"}
        for run in Run.unscoped.filter(workspace=ws).order_by("run_id"):
            row = {
                f.attname: getattr(run, f.attname) for f in Run._meta.concrete_fields if f.attname not in skip
            }
            events = list(
                Event.objects.filter(run=run)
                .order_by("seq")
                .values_list(
                    "seq", "event_id", "type", "ts", "step_id", "correlation_id", "body", "actor", "span_ref"
                )
            )
            trace = OtelTrace.objects.filter(run=run).values(
                "trace_id", "session_id", "title", "root_status", "root_ended", "ended"
            )
            calls = list(
                RunCostRollup.objects.filter(run=run)
                .order_by("key_hash")
                .values("key_hash", "call_day", "provider", "model", "calls", "input_tokens", "output_tokens")
            )
            runs[run.run_id] = (row, events, list(trace), calls, transcript_path(run).read_bytes())
        rollups = (
            sorted(
                map(str, CostRollup.objects.filter(workspace=ws).values("key_hash", "calls", "input_tokens"))
            ),
            sorted(
                map(
                    str, RunRollup.objects.filter(workspace=ws).values("workflow_id", "runs", "waiting_gates")
                )
            ),
        )
        return runs, rollups

    ours, theirs = stored(workspace), stored(other_workspace)
    assert list(ours[0]) == list(theirs[0]) and len(ours[0]) == 5
    for run_id in ours[0]:
        assert ours[0][run_id] == theirs[0][run_id], run_id
    assert ours[1] == theirs[1] and ours[1][0] and ours[1][1]


def test_runs_created_together_each_count_their_own_calls(workspace):
    """More new runs in one request than rollup shards: runs of one shard share the workspace's
    rollup keys, and each run's own rows still hold its own calls, not its shard's (the sums of
    the batch's workspace write once added into the first run's own rows)."""
    from runs.actions import rollups

    do_ingest_spans(workspace=workspace, spans=[s for t in range(9) for s in a_trace(t)])
    for t in range(9):
        [(_labels, sums)] = rollups.run_calls(run_of(workspace, t))
        assert sums[:3] == [1, 100, 20]
    assert rollups.rollups_match(workspace)


def test_after_a_conflict_the_other_new_runs_are_created_together_again(workspace, monkeypatch):
    """A trace another writer created meanwhile (two storers meeting at the trace their batches
    share): the other new runs go in together in a second batch, not one at a time, and the late
    trace's spans land on the run that exists."""
    first = do_ingest_spans(workspace=workspace, spans=a_trace(0)[:1])
    existing = run_of(workspace, 0)
    monkeypatch.setattr(otlp_actions, "_known_traces", lambda workspace, trace_ids: {})  # the lookup misses
    batches: list[int] = []
    real = otlp_actions.save_new_runs

    def counted(appenders):
        batches.append(len(appenders))
        real(appenders)

    monkeypatch.setattr(otlp_actions, "save_new_runs", counted)
    report = do_ingest_spans(
        workspace=workspace, spans=a_trace(0)[1:] + [s for t in range(1, 6) for s in a_trace(t)]
    )
    assert (report.accepted, report.rejected) == (17, 0)
    assert batches == [6, 5]  # the first batch met trace 0's run; the 5 others went in together
    assert {run_of(workspace, t).run_id for t in range(1, 6)} <= set(report.created)
    assert run_of(workspace, 0).pk == existing.pk and first.created == [existing.run_id]
    assert [e["type"] for e in bodies(existing)].count("span_started") == 3
    assert Run.objects.filter(workspace=workspace).count() == 6
    from runs.actions import rollups

    assert rollups.rollups_match(workspace)
