"""The one write path: appends, refusals that change nothing, projection == fold, lineage."""

from __future__ import annotations

import pytest

from runs import actions
from runs.actions import ActionError, core
from runs.engine import commands as cmd
from runs.models import ArtifactVersion, Event, Run
from runs.selectors.runs import RunNotFound, fold_run, get_run, state_at

pytestmark = pytest.mark.django_db


def _start(workspace, workflow, **kw):
    return actions.do_start_run(workspace=workspace, workflow=workflow, actor="user:alice", **kw)


def test_start_and_append_assigns_consecutive_seqs(workspace, workflow):
    run = _start(workspace, workflow, tags=["t1"])
    r1 = actions.do_command(
        workspace=workspace, run_id=run.run_id, command=cmd.BeginStep(step_id="parse"), actor="user:alice"
    )
    r2 = actions.do_commands(
        workspace=workspace,
        run_id=run.run_id,
        commands=[
            cmd.WriteArtifact(key="notes", type_id="free.notes", data={"a": 1}),
            cmd.CompleteStep(step_id="parse"),
        ],
        actor="token:7",
    )
    assert r1.seqs == [1]
    assert r2.seqs[0] == 2 and r2.seqs == list(range(2, 2 + len(r2.events)))
    run.refresh_from_db()
    assert run.last_seq == Event.objects.filter(run=run).count() == run.revision
    assert list(Event.objects.filter(run=run).values_list("actor", flat=True))[-1] == "token:7"
    assert ArtifactVersion.objects.filter(run=run, key="notes", version=1).exists()
    assert actions.projection_matches_fold(run)


def test_refused_command_changes_nothing(workspace, workflow):
    run = _start(workspace, workflow)
    before = (Event.objects.count(), Run.objects.get(run_id=run.run_id).state)
    with pytest.raises(ActionError) as exc:
        actions.do_commands(
            workspace=workspace,
            run_id=run.run_id,
            commands=[cmd.BeginStep(step_id="parse"), cmd.BeginStep(step_id="publish")],
        )
    assert exc.value.code == "INVALID_STATE_TRANSITION"
    assert (Event.objects.count(), Run.objects.get(run_id=run.run_id).state) == before


def test_other_workspace_cannot_write_or_read(workspace, other_workspace, workflow):
    run = _start(workspace, workflow)
    with pytest.raises(ActionError) as exc:
        actions.do_command(
            workspace=other_workspace, run_id=run.run_id, command=cmd.BeginStep(step_id="parse")
        )
    assert exc.value.code == "UNKNOWN_RUN"
    with pytest.raises(RunNotFound):
        get_run(other_workspace, run.run_id)


def test_gate_flow_and_state_at(workspace, workflow, settings):
    settings.WORKBENCH_SNAPSHOT_INTERVAL = 10
    run = _start(workspace, workflow)
    s = lambda c: actions.do_command(workspace=workspace, run_id=run.run_id, command=c)  # noqa: E731
    s(cmd.BeginStep(step_id="parse"))
    for i in range(12):
        s(cmd.Annotate(text=f"note {i}"))
    s(cmd.CompleteStep(step_id="parse"))
    s(cmd.RequestGate(step_id="review", gate="PAUSE_BEFORE"))
    run.refresh_from_db()
    assert run.pending_gates == 1
    with pytest.raises(ActionError):
        s(cmd.BeginStep(step_id="review"))
    s(cmd.ResolveGate(step_id="review", gate="PAUSE_BEFORE", decision="approved", note="ok"))
    s(cmd.BeginStep(step_id="review"))
    run.refresh_from_db()
    assert run.pending_gates == 0
    assert run.snapshots.exists()
    # state at every seq equals a fresh fold of the prefix
    for seq in (0, 1, 9, 10, 11, run.last_seq):
        at = state_at(run, seq)
        assert at.revision == seq
    assert state_at(run, 1).step_status["parse"] == "running"
    assert fold_run(run).to_json() == core.load_state(run).to_json()


def test_idempotent_write_collapses(workspace, workflow):
    run = _start(workspace, workflow)
    write = cmd.WriteArtifact(key="k", type_id="free", data={"v": 1}, idempotency_key="idem-1")
    first = actions.do_command(workspace=workspace, run_id=run.run_id, command=write)
    again = actions.do_command(workspace=workspace, run_id=run.run_id, command=write)
    assert len(first.events) == 1 and again.events == []
    with pytest.raises(ActionError) as exc:
        actions.do_command(
            workspace=workspace,
            run_id=run.run_id,
            command=cmd.WriteArtifact(key="k", type_id="free", data={"v": 2}, idempotency_key="idem-1"),
        )
    assert exc.value.code == "IDEMPOTENCY_CONFLICT"


def test_fork_and_cancel_tree(workspace, workflow):
    root = _start(workspace, workflow)
    actions.do_command(
        workspace=workspace, run_id=root.run_id, command=cmd.WriteArtifact(key="a", type_id="x", data=[1])
    )
    child = actions.do_fork_from_state(workspace=workspace, parent_run_id=root.run_id)
    grandchild = actions.do_fork_from_state(workspace=workspace, parent_run_id=child.run_id)
    finished = actions.do_fork_from_state(workspace=workspace, parent_run_id=root.run_id)
    actions.do_command(workspace=workspace, run_id=finished.run_id, command=cmd.CompleteRun())
    assert child.parent_links.get().parent_run_id == root.run_id
    assert ArtifactVersion.objects.filter(run=child, key="a").exists()
    report = actions.do_cancel_tree(workspace=workspace, run_id=root.run_id, reason="stop")
    assert set(report.cancelled) == {root.run_id, child.run_id, grandchild.run_id}
    assert [rid for rid, _ in report.skipped] == [finished.run_id]
    assert Run.objects.get(run_id=grandchild.run_id).status == "cancelled"


def test_fast_event_insert_covers_every_event_column():
    """The executemany fast path must write exactly the columns the Event model declares."""
    columns = {f.column for f in Event._meta.concrete_fields if not f.primary_key}
    assert set(core._EVENT_COLUMNS) == columns


def test_new_run_rows_insert_like_the_orm(workspace, workflow):
    """save_new_runs's insert (no ORM compiler) stores every column as Run.objects.bulk_create
    would, and gives each object its own new id, in order, as bulk_create does."""
    from runs.actions.core import _insert_new_runs, engine_context, new_run_row
    from runs.engine.lifecycle import new_run
    from runs.models import Workspace

    other = Workspace.objects.create(slug="other", name="Other")
    states = [
        new_run(
            ctx=engine_context(),
            workflow=workflow,
            run_id=f"run-{i}",
            metadata={"n": i, "text": "é\u2028"},
            tags=[f"t{i}", "shared"],
            title=f"Run ‘{i}’",
        )
        for i in range(3)
    ]
    by_orm = [new_run_row(workspace=workspace, state=state, actor="user:alice") for state in states]
    by_sql = [new_run_row(workspace=other, state=state, actor="user:alice") for state in states]
    Run.objects.bulk_create(by_orm)
    _insert_new_runs(by_sql)
    stored = Run.unscoped.filter(pk__in=[r.pk for r in by_sql]).order_by("pk")
    assert [r.run_id for r in stored] == [r.run_id for r in by_sql]  # each object got its own row's id
    assert all(not r._state.adding and r._state.db == "default" for r in by_sql)
    names = [f.attname for f in Run._meta.concrete_fields if f.attname not in {"id", "workspace_id"}]
    for orm, sql in zip(by_orm, by_sql, strict=True):
        stored_orm = Run.unscoped.values(*names).get(pk=orm.pk)
        stored_sql = Run.unscoped.values(*names).get(pk=sql.pk)
        for stamp in ("created_at", "updated_at"):  # set on the object by pre_save, as the ORM does
            assert stored_sql.pop(stamp) == getattr(sql, stamp)
            assert stored_orm.pop(stamp) == getattr(orm, stamp)
        assert stored_sql == stored_orm
    assert {f.column for f in core._run_insert_fields()} == {
        f.column for f in Run._meta.concrete_fields if not f.primary_key
    }


def test_new_trace_rows_insert_like_the_orm(workspace, workflow):
    """core.insert_new_rows (OTLP ingest's trace rows) stores what OtelTrace.objects.bulk_create
    stores, the values its fast path passes through as they are (text with NUL, text longer than
    its column, booleans, foreign keys, None) and those it converts alike."""
    from datetime import UTC, datetime

    from runs.actions.core import engine_context, insert_new_rows, new_run_row, save_new_run
    from runs.engine.lifecycle import new_run
    from runs.models import OtelTrace, Workspace

    other = Workspace.objects.create(slug="other", name="Other")
    runs = {}
    for ws in (workspace, other):
        state = new_run(ctx=engine_context(), workflow=workflow, run_id="r")
        runs[ws.pk] = new_run_row(workspace=ws, state=state, actor="otlp")
        save_new_run(runs[ws.pk])

    def rows(ws):
        return [
            OtelTrace(
                workspace=ws,
                trace_id=f"{i:032x}",
                run=runs[ws.pk],
                session_id=["", "s\x00nul", "é" * 250][i],
                title=["t", "x" * 400, "‘title’\u2028"][i],
                root_status=["", "ok", "error"][i],
                root_ended=bool(i % 2),
                last_span_at=datetime(2026, 1, 2, 3, 4, 5, 6000 * i, tzinfo=UTC),
                ended=i == 2,
            )
            for i in range(3)
        ]

    by_orm, by_sql = rows(workspace), rows(other)
    OtelTrace.objects.bulk_create(by_orm)
    insert_new_rows(OtelTrace, by_sql)
    assert list(OtelTrace.objects.filter(workspace=other).order_by("pk").values_list("pk", flat=True)) == [
        r.pk for r in by_sql
    ]
    names = [
        f.attname
        for f in OtelTrace._meta.concrete_fields
        if f.attname not in {"id", "workspace_id", "run_id"}
    ]
    for orm, sql in zip(by_orm, by_sql, strict=True):
        assert OtelTrace.objects.values(*names).get(pk=orm.pk) == OtelTrace.objects.values(*names).get(
            pk=sql.pk
        )
        assert OtelTrace.objects.get(pk=sql.pk).run_id == runs[other.pk].pk


def test_new_instances_are_those_of_the_models_constructor(workspace, workflow):
    """core.new_instance (OTLP ingest's new runs and trace rows) builds what Model(**values) builds:
    every attribute, the related objects cached, a new row's state; a model with a post_init
    receiver, or a name it does not know, goes through the constructor itself."""
    from datetime import UTC, datetime

    from django.db.models.signals import post_init

    from runs.actions.core import engine_context, new_instance, new_run_row, save_new_run
    from runs.engine.lifecycle import new_run
    from runs.models import OtelTrace, Run

    state = new_run(ctx=engine_context(), workflow=workflow, run_id="r")
    run = new_run_row(workspace=workspace, state=state, actor="otlp")
    built_run = Run(run_id="r", workspace=workspace, workflow_id=run.workflow_id, workflow_version=1)
    assert type(run) is Run and (run._state.adding, run._state.db) == (True, built_run._state.db)
    save_new_run(run)
    values = {"workspace": workspace, "trace_id": "1" * 32, "run": run, "title": "t",
              "last_span_at": datetime(2026, 1, 2, tzinfo=UTC)}  # fmt: skip

    def seen(obj) -> tuple:
        data = {k: v for k, v in obj.__dict__.items() if k != "_state"}
        return data, dict(obj._state.fields_cache), obj._state.adding, obj._state.db

    made, built = new_instance(OtelTrace, **values), OtelTrace(**values)
    assert seen(made) == seen(built) and made.run is run and made.workspace is workspace
    fields = {"run_id": "r", "workflow_id": "w", "workflow_version": 1, "workspace": workspace}
    assert seen(new_instance(Run, **fields)) == seen(Run(**fields))  # callable defaults (tags, costs)
    with pytest.raises(TypeError):
        new_instance(OtelTrace, **values, unknown=1)  # the constructor's own refusal

    calls = []

    def receiver(sender, instance, **kwargs):
        calls.append(instance)

    post_init.connect(receiver, sender=OtelTrace)
    try:
        traced = new_instance(OtelTrace, **values)
    finally:
        post_init.disconnect(receiver, sender=OtelTrace)
    assert calls == [traced]
