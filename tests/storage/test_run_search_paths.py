"""The runs list's text search has two paths (runs.selectors.runs.runs_page): a bounded keyset walk
of the newest filtered runs, and the trigram-indexed set of matches for a term too rare to fill a
page there. Both must list exactly the same runs, in the same order, page after page, for broad
and rare terms, any case, with filters, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from runs import actions
from runs.selectors import runs as sel

pytestmark = pytest.mark.django_db

RUNS = 30


def _events(run_id: str, i: int) -> list[dict]:
    common = {
        "runId": run_id,
        "ts": "2026-01-01T00:00:00.000Z",
        "type": "model_io",
        "provider": "p",
        "model": "m",
    }
    answer = f"answer word{i % 3} number {i}" + (" Zebra crossing" if i == 17 else "")
    return [
        {**common, "id": f"evt_{run_id}_q", "direction": "request", "payload": {"prompt": f"ask{i % 5}"}},
        {**common, "id": f"evt_{run_id}_a", "direction": "response", "summary": answer},
    ]


@pytest.fixture
def searchable(workspace, workflow, other_workspace):
    for ws in (workspace, other_workspace):
        for i in range(RUNS):
            run_id = f"run_srch_{i:02d}"
            actions.do_start_run(
                workspace=ws, workflow=workflow, actor="t", run_id=run_id, tags=[f"t{i % 2}"]
            )
            actions.do_append_events(workspace=ws, run_id=run_id, events=_events(run_id, i))
    return workspace


def _all_pages(workspace, filters, *, probe: bool, limit: int = 4) -> list[list[str]]:
    pages, cursor = [], ""
    while True:
        if probe:
            page, cursor = sel.runs_page(workspace, filters, cursor=cursor, limit=limit)
        else:
            qs = sel.runs_matching(workspace, filters)
            page, cursor = sel.keyset_page(qs, cursor=cursor, limit=limit)
        pages.append([run.run_id for run in page])
        if not cursor:
            return pages


@pytest.mark.parametrize(("probe_runs", "first"), [(3, 2), (9, 2), (2400, 2), (2400, 4), (2400, 200)])
@pytest.mark.parametrize(
    "q", ["word1", "WORD2", "zebra", "number 1", "run_srch_0", "ASK3", "nothing like it", "%", "_"]
)
def test_probe_and_index_paths_page_identically(searchable, monkeypatch, q, probe_runs, first):
    monkeypatch.setattr(sel, "SEARCH_PROBE_RUNS", probe_runs)
    monkeypatch.setattr(sel, "SEARCH_PROBE_FIRST_CHUNK", first)
    for extra in ({}, {"tag": "t1"}):
        filters = sel.RunListFilters(q=q, **extra)
        expected = _all_pages(searchable, filters, probe=False)
        assert _all_pages(searchable, filters, probe=True) == expected, (q, extra)


def test_a_broad_term_is_answered_by_the_walk_without_the_index_path(searchable, monkeypatch):
    calls = []
    monkeypatch.setattr(sel, "_text_match", lambda *a: calls.append(a) or pytest.fail("index path"))
    page, cursor = sel.runs_page(searchable, sel.RunListFilters(q="answer"), limit=5)
    assert len(page) == 5 and cursor and not calls
