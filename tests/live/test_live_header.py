"""The run page header's "Events N" follows the run live: every update carries it (rows-only ones too)."""

from __future__ import annotations

import pytest

from runs.live.fragments import render_fragments

pytestmark = pytest.mark.django_db


def _panel(update, name):
    return next((p for p in update.panels if p.name == name), None)


def test_every_update_carries_the_event_count(workspace, workflow):
    from runs import actions
    from runs.engine import commands as c

    run = actions.do_start_run(workspace=workspace, workflow=workflow, run_id="run_live_n")
    actions.do_commands(
        workspace=workspace,
        run_id="run_live_n",
        commands=[c.Annotate(text=f"n{i}") for i in range(1234)],
    )
    # annotations only: no panel can change but the count
    update = render_fragments(run_pk=run.pk, role="viewer", after_seq=1233, upto_seq=1234)
    assert [p.name for p in update.panels] == ["run_events"]
    html = _panel(update, "run_events").encoded
    assert 'id=\\"run-events\\" hx-swap-oob=\\"true\\"' in html and "1,234" in html
    actions.do_command(workspace=workspace, run_id="run_live_n", command=c.BeginStep("parse"))
    update = render_fragments(run_pk=run.pk, role="viewer", after_seq=1234, upto_seq=1235)
    assert "1,235" in _panel(update, "run_events").encoded
    assert _panel(update, "status_badge") is not None


def test_the_page_says_whether_it_is_live(client, alice, workspace, workflow):
    from runs import actions
    from tests.pages.conftest import login

    actions.do_start_run(workspace=workspace, workflow=workflow, run_id="run_live_p")
    html = login(client, alice).get("/runs/run_live_p/").content.decode()
    assert 'id="live-indicator" role="status"' in html and 'data-state="connecting"' in html
    assert '<span id="run-events">0 ' in html
    actions.do_cancel_tree(workspace=workspace, run_id="run_live_p", reason="done")
    html = client.get("/runs/run_live_p/").content.decode()
    assert 'data-state="finished"' in html and "Finished: no new events" in html
