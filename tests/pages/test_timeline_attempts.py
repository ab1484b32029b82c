"""Attempt numbers on the timeline (``· attempt n``) stay right on a page deep in the run: counted
from the step's starts before the page (an index-only count), not by reading every start."""

from __future__ import annotations

import itertools

import pytest

pytestmark = pytest.mark.django_db

LOOP = {
    "id": "wf-attempts",
    "version": 1,
    "steps": [{"id": "draft"}, {"id": "review"}],
    "edges": [{"id": "e1", "from": "draft", "to": "review"}],
}


def _external_run(workspace, rounds: int):
    from runs import actions
    from runs.actions.runs import do_start_run
    from runs.engine import commands as c

    run = do_start_run(workspace=workspace, workflow=LOOP, metadata={"workbench.driver": "external"})
    ids = itertools.count(1)
    events = []
    for _ in range(rounds):
        for step in ("draft", "review"):
            for etype, extra in (("step_started", {}), ("step_completed", {"ok": True})):
                events.append(
                    {
                        "id": f"evt_a{next(ids):04d}",
                        "runId": run.run_id,
                        "ts": "2026-11-26T10:00:00.000Z",
                        "type": etype,
                        "stepId": step,
                        **extra,
                    }
                )
    actions.do_commands(workspace=workspace, run_id=run.run_id, commands=[c.AppendEvents(events)], actor="t")
    run.refresh_from_db()
    return run


def _labels(run, **page):
    from runs.selectors.runs import timeline_page

    return [(r.seq, r.summary) for r in timeline_page(run, **page).rows if r.type.startswith("step_")]


def test_attempts_are_numbered_from_the_runs_start_on_every_page(workspace):
    run = _external_run(workspace, rounds=6)
    whole = _labels(run, limit=500)
    drafts = [s for _, s in whole if "draft started" in s]
    assert [d.rsplit("attempt ", 1)[1] for d in drafts] == ["1", "2", "3", "4", "5", "6"]
    # a page in the middle: the same labels as the whole trace shows for those rows
    mid = whole[len(whole) // 2][0]
    page = _labels(run, after=mid, limit=5)
    assert page and all(dict(whole)[seq] == summary for seq, summary in page)
    # a page before a later attempt: the first attempt is already labelled "attempt 1"
    first = _labels(run, limit=3)
    assert any(s.endswith("attempt 1") for _, s in first)


def test_a_step_that_ran_once_gets_no_attempt_label(workspace):
    run = _external_run(workspace, rounds=1)
    assert all("attempt" not in s for _, s in _labels(run, limit=500))
