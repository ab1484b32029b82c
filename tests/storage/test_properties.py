"""Through the actions and the database: random command sequences keep projection == fold(events),
and export -> import -> export is byte-identical."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runs import actions
from runs.actions import ActionError, core
from runs.models import Run, Workspace
from runs.protocol.canonical import parse_json
from runs.selectors.bundles import export_bundle_bytes
from runs.selectors.runs import state_at
from tests.engine.test_properties import GATED, command

pytestmark = pytest.mark.django_db

HYPOTHESIS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@HYPOTHESIS
@given(commands=st.lists(command, max_size=25), batch=st.integers(1, 4))
def test_projection_equals_fold_and_round_trip(commands, batch, settings_snapshot_interval):
    workspace, _ = Workspace.objects.get_or_create(slug="prop", defaults={"name": "prop"})
    run = actions.do_start_run(workspace=workspace, workflow=GATED, run_id=f"run_{uuid.uuid4()}")
    for i in range(0, len(commands), batch):
        chunk = commands[i : i + batch]
        before = Run.objects.get(run_id=run.run_id)
        try:
            actions.do_commands(workspace=workspace, run_id=run.run_id, commands=chunk, actor="prop")
        except ActionError:
            after = Run.objects.get(run_id=run.run_id)
            assert (after.state, after.last_seq) == (before.state, before.last_seq)  # refused: unchanged
    run.refresh_from_db()
    assert actions.projection_matches_fold(run)
    # state at the last seq (snapshots included) is the projection itself
    assert state_at(run, run.last_seq).to_json() == core.load_state(run).to_json()

    exported = export_bundle_bytes(run)
    other, _ = Workspace.objects.get_or_create(slug="prop-copy", defaults={"name": "copy"})
    Run.objects.filter(run_id=run.run_id).delete()
    imported = actions.do_import_bundle(workspace=other, data=exported)
    assert export_bundle_bytes(imported) == exported
    assert parse_json(exported)["integrity"]["sha256"]


@pytest.fixture
def settings_snapshot_interval(settings):
    settings.WORKBENCH_SNAPSHOT_INTERVAL = 10
