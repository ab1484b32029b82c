"""Rollups kept on the write path equal a full recomputation, and the workspace ledger read from them
equals the ledger of a scan of every model_io body, for random histories: appends, forks with
copied history, imports (redacted or not), deletes."""

from __future__ import annotations

import io
import itertools
from datetime import date
from decimal import Decimal

import pytest
from django.core.management import call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runs import actions
from runs.actions import rollups
from runs.actions.forks import do_fork_with_history
from runs.models import CostRollup, Event, Run, RunRollup, Workspace
from runs.protocol.telemetry import LedgerAccumulator
from runs.protocol.values import loads
from runs.selectors.bundles import export_bundle_bytes
from runs.selectors.ledger import CALLS_SHOWN, ledger_from_rollups, run_ledger_view, workspace_ledger_data
from runs.selectors.run_list import pending_gate_count
from tests.engine.test_properties import GATED, command

pytestmark = pytest.mark.django_db

WORKFLOW = {
    "id": "wf-roll",
    "version": 1,
    "steps": [{"id": "plan"}, {"id": "write"}],
    "edges": [{"id": "e1", "from": "plan", "to": "write"}],
}
ALL_DAYS = {"first": date(1, 1, 1), "last": date(9999, 12, 30)}

_ids = itertools.count()

response = st.fixed_dictionaries(
    {
        "provider": st.sampled_from([None, "openai", "anthropic"]),
        "model": st.sampled_from([None, "m-1", "m-2"]),
        "stepId": st.sampled_from([None, "plan", "write"]),
        "day": st.sampled_from(["2026-03-01", "2026-03-02"]),
        "usage": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {"inputTokens": st.integers(0, 10**6), "outputTokens": st.integers(0, 10**6)},
                optional={"totalTokens": st.integers(0, 3 * 10**6), "cachedInputTokens": st.integers(0, 99)},
            ),
        ),
        "cost": st.one_of(
            st.none(),
            st.tuples(
                st.sampled_from([0, 0.1, 0.2, 1e-9, 123456.789, 0.00035, 3]),
                st.sampled_from(["USD", " usd ", "EUR"]),
            ),
        ),
        "durationMs": st.one_of(st.none(), st.sampled_from([0, 100.4, 7])),
        "pricing": st.sampled_from(
            [None, {"source": "workspace"}, {"source": "genai-prices", "version": "0.9"}]
        ),
        # the fetched prompt a call used (only a str name with an int version counts)
        "prompt": st.sampled_from(
            [
                None,
                {"name": "greet", "version": 1},
                {"name": "greet", "version": 2},
                {"name": "summary", "version": 10},
                {"name": "greet", "version": True},
                {"name": 7, "version": 1},
                "greet@1",
            ]
        ),
    }
)


def _event(run_id: str, spec: dict) -> dict:
    event = {
        "id": f"evt_{next(_ids)}",
        "runId": run_id,
        "ts": f"{spec['day']}T10:00:00.000Z",
        "type": "model_io",
        "direction": "response",
    }
    for name in ("provider", "model", "stepId", "usage", "durationMs"):
        if spec[name] is not None:
            event[name] = spec[name]
    if spec["cost"] is not None:
        event["cost"] = {"amount": spec["cost"][0], "currency": spec["cost"][1]}
    if spec.get("pricing") is not None:
        event.setdefault("payload", {})["workbench.pricing"] = spec["pricing"]
    if spec.get("prompt") is not None:
        event.setdefault("payload", {})["workbench.prompt"] = spec["prompt"]
    return event


operation = st.one_of(
    st.tuples(
        st.just("start"), st.sampled_from([None, {"userId": "u-1"}, {"userId": "u-2", "tenantId": "t"}])
    ),
    st.tuples(st.just("append"), st.integers(0, 5), st.lists(response, min_size=1, max_size=4)),
    st.tuples(st.just("request"), st.integers(0, 5)),
    st.tuples(st.just("fork"), st.integers(0, 5), st.integers(1, 6)),
    st.tuples(st.just("import"), st.integers(0, 5), st.sampled_from([None, "drop", "mask"])),
    st.tuples(st.just("delete"), st.integers(0, 5)),
    st.tuples(st.just("gated"), st.sampled_from([None, {"planId": "pro"}])),
    st.tuples(st.just("commands"), st.integers(0, 5), st.lists(command, min_size=1, max_size=6)),
)


def _pick(workspace: Workspace, index: int) -> Run | None:
    runs = list(Run.objects.for_workspace(workspace).order_by("pk"))
    return runs[index % len(runs)] if runs else None


def _apply(workspace: Workspace, op: tuple) -> None:
    kind = op[0]
    if kind in ("start", "gated"):
        workflow = WORKFLOW if kind == "start" else GATED
        actions.do_start_run(
            workspace=workspace, workflow=workflow, subject=op[1], run_id=f"run_{next(_ids)}"
        )
        return
    run = _pick(workspace, op[1])
    if run is None:
        return
    if kind == "append":  # refused (a step the workflow lacks, an ended run): nothing counts
        events = [_event(run.run_id, spec) for spec in op[2]]
        try:
            actions.do_append_events(workspace=workspace, run_id=run.run_id, events=events)
        except actions.ActionError:
            pass
    elif kind == "request":  # a request is no response: it never counts
        event = {
            "id": f"evt_{next(_ids)}",
            "runId": run.run_id,
            "ts": "2026-03-01T09:00:00.000Z",
            "type": "model_io",
            "direction": "request",
            "provider": "openai",
        }
        try:
            actions.do_append_events(workspace=workspace, run_id=run.run_id, events=[event])
        except actions.ActionError:
            pass
    elif kind == "fork" and run.last_seq:
        do_fork_with_history(
            workspace=workspace,
            source_run_id=run.run_id,
            mode="branch",
            from_seq=min(op[2], run.last_seq),
            executable=False,
        )
    elif kind == "import":
        data = export_bundle_bytes(run, redact=op[2])
        actions.do_import_bundle(workspace=workspace, data=data, as_new_id=True)
    elif kind == "delete":
        actions.do_delete_run(workspace=workspace, run_id=run.run_id)
    elif kind == "commands":  # gates requested, decided, runs ended: the waiting-gate count follows
        for cmd in op[2]:
            try:
                actions.do_command(workspace=workspace, run_id=run.run_id, command=cmd)
            except actions.ActionError:
                pass


def _scan_ledger(workspace: Workspace, runs=None) -> LedgerAccumulator:
    """The ledger before rollups: every model_io body of every run, parsed."""
    acc = LedgerAccumulator(keep_entries=False, breakdowns=True)
    for run in Run.objects.for_workspace(workspace) if runs is None else runs:
        doc = run.run_doc
        for body in (
            Event.objects.filter(run=run, type="model_io").order_by("seq").values_list("body", flat=True)
        ):
            acc.add_event(doc, loads(body))
    return acc


def _counts(totals) -> tuple:
    d = totals.as_dict()
    return tuple(
        d[k] for k in ("eventCount", "inputTokens", "outputTokens", "totalTokens", "cachedInputTokens")
    )


def _costs(totals) -> dict:
    return {k: pytest.approx(v, rel=1e-12, abs=1e-12) for k, v in totals.cost.items()}


def _assert_same_ledger(got: LedgerAccumulator, want: LedgerAccumulator) -> None:
    assert _counts(got.totals) == _counts(want.totals)
    assert got.totals.cost == _costs(want.totals)
    assert got.exact_cost_by_currency() == want.exact_cost_by_currency()  # exact, to the last digit
    assert got.totals.duration_ms == pytest.approx(want.totals.duration_ms)
    for name, buckets in want.rollups.items():
        assert set(got.rollups[name]) == set(buckets), name
        for key, (label, totals) in buckets.items():
            assert got.rollups[name][key][0] == label
            assert _counts(got.rollups[name][key][1]) == _counts(totals), (name, key)
            assert got.rollups[name][key][1].cost == _costs(totals), (name, key)
    assert {d: _counts(t) for d, t in got.by_day.items()} == {d: _counts(t) for d, t in want.by_day.items()}
    assert {k: (label, _counts(t)) for k, (label, t) in got.by_pricing.items()} == {
        k: (label, _counts(t)) for k, (label, t) in want.by_pricing.items()
    }
    assert {k: _counts(t) for k, t in got.by_prompt.items()} == {
        k: _counts(t) for k, t in want.by_prompt.items()
    }
    assert {k: _costs(t) for k, t in want.by_prompt.items()} == {k: t.cost for k, t in got.by_prompt.items()}
    assert got.breakdown_result()["unattributed"].keys() == want.breakdown_result()["unattributed"].keys()


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(operation, min_size=1, max_size=14))
def test_rollups_equal_a_full_recomputation(ops):
    workspace = Workspace.objects.create(slug=f"roll-{next(_ids)}", name="r")
    for op in ops:
        _apply(workspace, op)
    assert rollups.rollups_match(workspace)  # the per-run rows (RunCostRollup) too
    _assert_same_ledger(ledger_from_rollups(workspace, **ALL_DAYS), _scan_ledger(workspace))
    for run in Run.objects.for_workspace(workspace):  # the run ledger, read from the run's own rows
        acc, calls, _ = run_ledger_view(run)
        _assert_same_ledger(acc, _scan_ledger(workspace, [run]))
        assert [c["seq"] for c in calls] == list(
            Event.objects.filter(run=run, type="model_io", body__contains='"direction":"response"')
            .order_by("seq")
            .values_list("seq", flat=True)[:CALLS_SHOWN]
        )
    _, run_count, _, _ = workspace_ledger_data(workspace, **ALL_DAYS)
    assert run_count == Run.objects.for_workspace(workspace).count()
    waiting = Run.objects.for_workspace(workspace).filter(status="running", pending_gates__gt=0)
    assert pending_gate_count(workspace) == sum(waiting.values_list("pending_gates", flat=True))


def test_costs_are_exact_sums(workspace):
    actions.do_start_run(workspace=workspace, workflow=WORKFLOW, run_id="r1")
    spec = {"provider": "p", "model": "m", "stepId": "plan", "day": "2026-03-01", "usage": None}
    events = [_event("r1", {**spec, "cost": (a, "usd"), "durationMs": None}) for a in (0.1, 0.2, 1e-30)]
    actions.do_append_events(workspace=workspace, run_id="r1", events=events)
    (row,) = CostRollup.objects.filter(workspace=workspace)
    assert (row.currency, row.calls, Decimal(row.cost)) == ("USD", 3, Decimal("0.3") + Decimal("1e-30"))
    acc = ledger_from_rollups(workspace, **ALL_DAYS)
    assert acc.exact_cost_by_currency() == {"USD": Decimal("0.3") + Decimal("1e-30")}


def _calls(workspace: Workspace) -> int:
    return sum(CostRollup.objects.filter(workspace=workspace).values_list("calls", flat=True))


def test_delete_and_rebuild(workspace):
    for run_id in ("a", "b"):
        actions.do_start_run(workspace=workspace, workflow=WORKFLOW, run_id=run_id)
        spec = {"provider": "p", "model": "m", "stepId": None, "day": "2026-03-01", "usage": None}
        actions.do_append_events(
            workspace=workspace,
            run_id=run_id,
            events=[_event(run_id, {**spec, "cost": (1, "EUR"), "durationMs": 5})],
        )
    assert _calls(workspace) == 2
    actions.do_delete_run(workspace=workspace, run_id="a")
    assert _calls(workspace) == 1
    assert sum(RunRollup.objects.filter(workspace=workspace).values_list("runs", flat=True)) == 1
    actions.do_delete_run(workspace=workspace, run_id="b")
    assert not CostRollup.objects.filter(workspace=workspace).exists()
    assert not RunRollup.objects.filter(workspace=workspace).exists()

    actions.do_start_run(workspace=workspace, workflow=WORKFLOW, run_id="c")
    actions.do_append_events(
        workspace=workspace, run_id="c", events=[_event("c", {**spec, "cost": (2, "EUR"), "durationMs": 5})]
    )
    CostRollup.objects.filter(workspace=workspace).update(calls=99)  # damaged
    assert not rollups.rollups_match(workspace)
    out = io.StringIO()
    call_command("rebuild_rollups", "--workspace", workspace.slug, stdout=out)
    assert "rebuilt (1 cost rows, 1 run counters)" in out.getvalue()
    assert rollups.rollups_match(workspace)
    assert CostRollup.objects.get(workspace=workspace).calls == 1


@pytest.mark.django_db(transaction=True)
def test_otlp_batch_ingest_counts_its_runs_and_calls(workspace):
    """OTLP ingest stores the runs of one request together (core.save_new_runs): they are counted."""
    from runs.actions.otlp import do_ingest_spans
    from tests.telemetry.test_otlp_batch import a_trace

    do_ingest_spans(workspace=workspace, spans=[s for t in range(3) for s in a_trace(t)])
    assert rollups.rollups_match(workspace)
    assert _calls(workspace) == 3
    assert sum(RunRollup.objects.filter(workspace=workspace).values_list("runs", flat=True)) == 3
    do_ingest_spans(workspace=workspace, spans=a_trace(3) + a_trace(0)[:1])  # a new run, an old one again
    assert rollups.rollups_match(workspace)


def test_the_run_ledger_reads_the_runs_rollup_rows_not_every_call(workspace):
    """The run ledger counts every call from the run's own rollup rows: with the bodies of all but
    the first calls gone from the event table, its totals still count them all."""
    actions.do_start_run(workspace=workspace, workflow=WORKFLOW, run_id="r-long")
    spec = {"provider": "p", "model": "m", "stepId": "plan", "day": "2026-03-01",
            "usage": {"inputTokens": 10, "outputTokens": 2}, "cost": (0.1, "USD"), "durationMs": 7,
            "pricing": None, "prompt": None}  # fmt: skip
    actions.do_append_events(
        workspace=workspace, run_id="r-long", events=[_event("r-long", spec) for _ in range(30)]
    )
    run = Run.objects.by_run_id(workspace, "r-long").get()
    first = Event.objects.filter(run=run, type="model_io").order_by("seq").values_list("seq", flat=True)[2]
    Event.objects.filter(run=run, seq__gt=first).delete()  # what a scan would need to count them
    acc, calls, priced_by = run_ledger_view(run, calls_shown=5)
    assert acc.totals.event_count == 30 and acc.totals.as_dict()["inputTokens"] == 300
    assert acc.exact_cost_by_currency() == {"USD": Decimal("3.0")}
    assert [c["seq"] for c in calls] == list(
        Event.objects.filter(run=run, type="model_io").order_by("seq").values_list("seq", flat=True)
    )
    assert sum(calls for _, calls in priced_by[next(iter(priced_by))].values()) == 30
