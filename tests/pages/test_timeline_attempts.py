"""Attempt numbers on the timeline (``· attempt n``) stay right on a page deep in the run: the
starts before the page come from the last snapshot before it plus the starts since, not from
reading every start of the step (at 10M events that count was most of a timeline page's time)."""

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


def _expected(run) -> dict[int, str]:
    """Each step row's label, from counting every start in the whole trace."""
    from runs.models import Event

    seen: dict[str, int] = {}
    totals: dict[str, int] = {}
    rows = list(Event.objects.filter(run=run).order_by("seq").values_list("seq", "type", "step_id"))
    for _, etype, step in rows:
        if etype == "step_started":
            totals[step] = totals.get(step, 0) + 1
    out = {}
    for seq, etype, step in rows:
        if etype == "step_started":
            seen[step] = seen.get(step, 0) + 1
        if etype.startswith("step_") and totals.get(step, 0) > 1:
            out[seq] = f"attempt {max(seen.get(step, 0), 1)}"
    return out


@pytest.mark.parametrize("page_size", [1, 3, 7])
def test_every_page_agrees_with_a_count_of_the_whole_trace_when_snapshots_are_used(
    workspace, settings, page_size
):
    settings.WORKBENCH_SNAPSHOT_INTERVAL = 10
    run = _external_run(workspace, rounds=12)
    from runs.models import RunSnapshot  # noqa: PLC0415 - the models load after django.setup()

    assert RunSnapshot.objects.filter(run=run).count() >= 4
    expected = _expected(run)
    for after in range(0, run.last_seq, page_size):
        for seq, summary in _labels(run, after=after, limit=page_size):
            label = expected.get(seq)
            assert summary.endswith(label) if label else "attempt" not in summary, (after, seq, summary)


def _shift_snapshot(run, by: int, warnings: list | None = None, drop_attempts: bool = False):
    """The second snapshot of the run made to say `by` more starts of every step (and `warnings`)."""
    import orjson  # noqa: PLC0415 - kept beside the tests that rewrite a snapshot

    from runs.models import RunSnapshot  # noqa: PLC0415 - the models load after django.setup()

    snapshot = RunSnapshot.objects.filter(run=run).order_by("seq")[1]
    state = orjson.loads(snapshot.state)
    state["stepAttempts"] = [[step, n + by] for step, n in state["stepAttempts"]]
    if warnings is not None:
        state["warnings"], state["warningCount"] = warnings, len(warnings)
    if drop_attempts:
        del state["stepAttempts"]
    snapshot.state = orjson.dumps(state).decode()
    snapshot.save()
    return snapshot.seq


def test_the_starts_before_a_page_come_from_the_snapshot_before_it(workspace, settings):
    """Not a count of every start: a snapshot that says three more starts moves every later label."""
    settings.WORKBENCH_SNAPSHOT_INTERVAL = 10
    run = _external_run(workspace, rounds=12)
    at = _shift_snapshot(run, 3)
    expected = _expected(run)
    shifted = [(seq, s) for seq, s in _labels(run, after=at + 1, limit=4) if "started" in s]
    assert shifted
    for seq, summary in shifted:
        assert summary.endswith(f"attempt {int(expected[seq].split()[1]) + 3}"), summary


def test_a_snapshot_whose_fold_skipped_an_unknown_step_is_not_used(workspace, settings):
    """The engine does not count a start of a step it does not know (an imported trace can hold
    one): such a snapshot's counts may be short, so the starts are counted from the beginning."""
    settings.WORKBENCH_SNAPSHOT_INTERVAL = 10
    run = _external_run(workspace, rounds=12)
    skipped = {"seq": 3, "code": "UNKNOWN_STEP", "message": "step_started for unknown step 'x'"}
    at = _shift_snapshot(run, 3, warnings=[skipped])
    expected = _expected(run)
    page = _labels(run, after=at + 1, limit=4)
    assert any("started" in s for _, s in page)
    for seq, summary in page:
        assert summary.endswith(expected[seq]), summary


def test_a_snapshot_without_attempt_counts_is_not_used(workspace, settings):
    """A snapshot written before the engine counted attempts has no ``stepAttempts``: not zero."""
    settings.WORKBENCH_SNAPSHOT_INTERVAL = 10
    run = _external_run(workspace, rounds=12)
    at = _shift_snapshot(run, 0, drop_attempts=True)
    expected = _expected(run)
    page = _labels(run, after=at + 1, limit=4)
    assert any("started" in s for _, s in page)
    for seq, summary in page:
        assert summary.endswith(expected[seq]), summary
