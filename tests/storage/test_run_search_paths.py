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


def _call(run_id: str, n: int, **fields) -> dict:
    return {
        "id": f"evt_{run_id}_{n}",
        "runId": run_id,
        "ts": "2026-01-01T00:00:00.000Z",
        "type": "model_io",
        **fields,
    }


@pytest.fixture
def said(workspace, workflow):
    """One run whose model calls say a few plain things, one that says nothing at all."""
    actions.do_start_run(workspace=workspace, workflow=workflow, actor="t", run_id="run_said")
    usage = {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7}
    request = {"messages": [{"role": "user", "content": 'is the weather "fine"?'}], "temperature": 0.5}
    actions.do_append_events(
        workspace=workspace,
        run_id="run_said",
        events=[
            _call("run_said", 1, direction="request", provider="p", model="m", payload=request),
            _call("run_said", 2, direction="response", usage=usage, summary="it is a\\b, cloudy\x00"),
        ],
    )
    actions.do_start_run(workspace=workspace, workflow=workflow, actor="t", run_id="run_quiet")
    return workspace


@pytest.mark.parametrize(
    "q",
    [
        "content",  # JSON keys: the body's, the payload's, the usage's
        "role",
        "tokens",
        "direction",
        "summary",
        "payload",
        "temperature",
        "evt_run",  # the envelope: ids, run id, timestamps
        "2026-01-01",
        "model_io",
        '"role":"user"',  # JSON text across keys and values
        "0.5",  # numbers are not text
    ],
)
@pytest.mark.parametrize("probe", [True, False])
def test_a_search_never_matches_the_json_around_what_was_said(said, q, probe):
    assert _all_pages(said, sel.RunListFilters(q=q), probe=probe) == [[]]


@pytest.mark.parametrize("q", ["WEATHER", 'the weather "fine"?', "user", "a\\b", "cloudy\x00", "It Is"])
@pytest.mark.parametrize("probe", [True, False])
def test_a_search_finds_what_was_asked_and_answered_as_written(said, q, probe):
    # quotes and backslashes as typed (the body's JSON text holds them escaped), NUL, any case
    assert _all_pages(said, sel.RunListFilters(q=q), probe=probe) == [["run_said"]]


def test_the_database_extracts_what_python_does(db):
    from django.db import connection

    from runs.fields import search_text
    from runs.protocol.values import dumps

    bodies = [
        dumps({"type": "model_io", "summary": "s", "payload": {"b": ["x", {"c": "y", "n": 1}], "a": "z"}}),
        dumps({"type": "model_io", "payload": "only \x00 this", "summary": 3}),
        dumps({"type": "model_io", "payload": {"k": "back\\u0000slash"}}),
        dumps({"type": "model_io", "direction": "request"}),
        '{"payload":"\\ud800 lone"}',  # neither parses it: the JSON text itself
    ]
    with connection.cursor() as cursor:
        for body in bodies:
            cursor.execute("SELECT wb_search_text(%s)", [body])
            got = cursor.fetchone()[0]
            # the same values (PostgreSQL's jsonb orders object members its own way)
            assert sorted(got.split("\n")) == sorted(search_text(body).split("\n")), body


def test_a_search_in_a_parallel_plan_is_no_error(said):
    """PostgreSQL: ``wb_search_text`` starts a subtransaction (its exception block), which a
    parallel query may not: it is PARALLEL UNSAFE, so a plan that would go parallel stays serial."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("parallel plans are PostgreSQL's")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM pg_settings WHERE name IN ('debug_parallel_query', 'force_parallel_mode')"
        )
        (setting,) = cursor.fetchone()
        cursor.execute(f"SET LOCAL {setting} = on")
        cursor.execute("SET LOCAL parallel_setup_cost = 0")
        cursor.execute("SET LOCAL parallel_tuple_cost = 0")
        cursor.execute("SET LOCAL min_parallel_table_scan_size = 0")
    for probe in (True, False):
        assert _all_pages(said, sel.RunListFilters(q="weather"), probe=probe) == [["run_said"]]
