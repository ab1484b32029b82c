"""The runs list's text search has two paths (runs.selectors.run_list.runs_page): a bounded keyset walk
of the newest filtered runs, and the trigram-indexed set of matches for a term too rare to fill a
page there. Both must list exactly the same runs, in the same order, page after page, for broad
and rare terms, any case, with filters, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from runs import actions
from runs.models import Run
from runs.selectors import run_list as sel

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
            _call(
                "run_said",
                2,
                direction="response",
                usage=usage,
                summary="it is a\\b, cloudy\x00",
                payload={"responseId": "chatcmpl-said42", "workbench.pricing": {"source": "genai-prices"}},
            ),
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
        "chatcmpl",  # a response id and the pricing provenance (runs.fields.NOT_SEARCHED)
        "genai-prices",
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
        # a response id and the pricing provenance are not searched (issue 53), at the top only
        dumps(
            {
                "type": "model_io",
                "payload": {
                    "responseId": "chatcmpl-9f3a",
                    "workbench.pricing": {"source": "genai-prices", "model": "m"},
                    "outputMessages": [{"role": "assistant", "responseId": "inner"}],
                },
            }
        ),
        dumps({"type": "model_io", "payload": ["responseId", "workbench.pricing"]}),
    ]
    with connection.cursor() as cursor:
        for body in bodies:
            cursor.execute("SELECT wb_search_text(%s)", [body])
            got = cursor.fetchone()[0]
            # the same values (PostgreSQL's jsonb orders object members its own way)
            assert sorted(got.split("\n")) == sorted(search_text(body).split("\n")), body
    assert search_text(bodies[5]).split("\n") == ["assistant", "inner"]
    assert search_text(bodies[6]).split("\n") == ["responseId", "workbench.pricing"]


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


def test_the_walk_stops_at_a_runs_first_call_that_says_the_term(workspace, workflow):
    """A run's model calls are parsed only up to the first that says the term (EXISTS), not all of
    them: a long run whose every call says it costs the walk one parse (SQLite: the parses of
    ``wb_search_text`` counted, the function registered again for the test)."""
    from django.db import connection

    from runs.fields import search_text

    if connection.vendor != "sqlite":
        pytest.skip("counts SQLite's calls of its Python wb_search_text")
    run_id = "run_long_said"
    actions.do_start_run(workspace=workspace, workflow=workflow, actor="t", run_id=run_id)
    common = {"runId": run_id, "ts": "2026-01-01T00:00:00.000Z", "type": "model_io", "provider": "p"}
    calls = [
        {**common, "id": f"evt_long_{i}", "direction": "response", "summary": f"a needle, number {i}"}
        for i in range(300)
    ]
    actions.do_append_events(workspace=workspace, run_id=run_id, events=calls)
    parsed = []

    def counting(body):
        parsed.append(body)
        return search_text(body)

    connection.ensure_connection()
    connection.connection.create_function("wb_search_text", 1, counting, deterministic=True)
    try:
        page, _ = sel.runs_page(workspace, sel.RunListFilters(q="NEEDLE"), cursor="", limit=4)
    finally:
        connection.connection.create_function("wb_search_text", 1, search_text, deterministic=True)
    assert [run.run_id for run in page] == [run_id]
    assert 1 <= len(parsed) <= 3, len(parsed)


def test_the_walk_parses_no_call_for_a_term_that_is_only_a_key_name(workspace, workflow):
    """PostgreSQL: a call whose JSON text spells the term only as a key ("content":) is refused by
    the cheap test, not parsed by ``wb_search_text`` (this transaction's calls of the function
    counted), and a call that says it in a value still is found."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("counts PostgreSQL's calls of wb_search_text")
    common = {"ts": "2026-01-01T00:00:00.000Z", "type": "model_io", "provider": "p", "direction": "response"}
    for run_id, said in (("run_keys_only", "an answer"), ("run_says_it", 'the "Content": of it')):
        actions.do_start_run(workspace=workspace, workflow=workflow, actor="t", run_id=run_id)
        calls = [
            {**common, "runId": run_id, "id": f"evt_{run_id}_{i}", "payload": {"content": said, "role": "x"}}
            for i in range(50)
        ]
        actions.do_append_events(workspace=workspace, run_id=run_id, events=calls)
    pks = {r.run_id: r.pk for r in Run.objects.filter(run_id__in=["run_keys_only", "run_says_it"])}

    def parses() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL track_functions = 'pl'")
            cursor.execute("SELECT pg_stat_get_xact_function_calls('wb_search_text'::regproc)")
            return cursor.fetchone()[0] or 0

    before = parses()
    assert sel._probe_hits([pks["run_keys_only"]], "content") == set()
    assert parses() == before
    assert sel._probe_hits([pks["run_keys_only"], pks["run_says_it"]], "CONTENT") == {pks["run_says_it"]}
    assert sel._probe_hits([pks["run_keys_only"]], "role") == set()
