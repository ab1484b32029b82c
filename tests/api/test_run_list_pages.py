"""GET /api/runs (issue 53): keyset pages with no stop at 500 (the Link header's next page, an
opaque cursor), filters by status, workflow, tag, start range and the OTLP trace id (the run of a
trace), each combined with the pages; bad filters and cursors answer 400 and read nothing."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from runs import actions
from runs.actions.otlp import do_ingest_spans
from runs.models import Run
from tests.telemetry.test_otlp_batch import a_trace, trace_id

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _next(response) -> str | None:
    found = re.search(r'<([^>]+)>; rel="next"', response.get("Link", ""))
    return found.group(1) if found else None


def _all(api, path: str, **params) -> tuple[list[str], int]:
    """Every run id the list gives, following next links; and the number of pages."""
    ids, pages = [], 0
    response = api.get(path, **params)
    while True:
        assert response.status_code == 200, response.content
        pages += 1
        ids += [meta["id"] for meta in response.json()]
        url = _next(response)
        if url is None:
            return ids, pages
        response = api.get(url)


@pytest.fixture
def many(workspace, workflow):
    """12 runs a minute apart (run_00 oldest), every third failed, tags by parity."""
    for i in range(12):
        actions.do_start_run(
            workspace=workspace, workflow=workflow, actor="user:t", run_id=f"run_{i:02d}",
            tags=["even" if i % 2 == 0 else "odd"],
        )  # fmt: skip
        Run.objects.filter(workspace=workspace, run_id=f"run_{i:02d}").update(
            started_at=T0 + timedelta(minutes=i), status="failed" if i % 3 == 0 else "running"
        )
    return [f"run_{i:02d}" for i in reversed(range(12))]  # newest first


def test_pages_follow_next_links_to_the_end(api, many):
    ids, pages = _all(api, "/api/runs", limit="5")
    assert ids == many and pages == 3
    first = api.get("/api/runs", limit="5")
    assert "cursor=" in _next(first) and 'rel="describedby"' in first["Link"]
    assert _next(api.get("/api/runs", limit="12")) is None  # the last page says so


def test_no_stop_at_500(api, workspace, workflow, many):
    """A page holds 500 at most, and the next link goes on past it."""
    extra = [
        Run(
            workspace=workspace, run_id=f"run_b{i:03d}", workflow_id="wf", status="completed",
            started_at=T0 - timedelta(hours=1, seconds=i), doc='{"startedAt":"2026-02-28T23:00:00Z"}',
            state="{}", tags=[],
        )
        for i in range(520)
    ]  # fmt: skip
    Run.objects.bulk_create(extra)
    response = api.get("/api/runs", limit="1000")
    assert len(response.json()) == 500 and _next(response)
    ids, pages = _all(api, "/api/runs", limit="1000")
    assert len(ids) == len(set(ids)) == 532 and pages == 2


def test_filters_combine_with_pages(api, many):
    failed = [r for r in many if int(r[-2:]) % 3 == 0]
    assert _all(api, "/api/runs", status="failed", limit="2") == (failed, 2)
    even_failed = [r for r in failed if int(r[-2:]) % 2 == 0]
    assert _all(api, "/api/runs", status="failed", tag="even", limit="1")[0] == even_failed
    window = {
        "startedAfter": (T0 + timedelta(minutes=3)).isoformat(),
        "startedBefore": "2026-03-01T00:07:00Z",
    }
    assert _all(api, "/api/runs", limit="2", **window)[0] == ["run_06", "run_05", "run_04", "run_03"]
    assert _all(api, "/api/runs", workflow="nope")[0] == []


def test_the_run_of_a_trace(api, workspace, many):
    report = do_ingest_spans(workspace=workspace, spans=a_trace(0) + a_trace(1))
    assert len(report.created) == 2
    found = api.get("/api/runs", traceId=trace_id(1).upper()).json()
    assert [meta["id"] for meta in found] == [Run.objects.get(otel_traces__trace_id=trace_id(1)).run_id]
    assert api.get("/api/runs", traceId="f" * 32).json() == []


def test_the_run_of_a_trace_is_not_another_workspaces(outsider, workspace):
    do_ingest_spans(workspace=workspace, spans=a_trace(0))
    assert outsider.get("/api/runs", traceId=trace_id(0)).json() == []


@pytest.mark.parametrize(
    "params",
    [{"cursor": "garbage"}, {"cursor": "2026-01-01T00:00:00|0"}, {"status": "nope"}, {"traceId": "xyz"},
     {"startedAfter": "yesterday"}],
)  # fmt: skip
def test_bad_filters_and_cursors_answer_400(api, many, params):
    response = api.get("/api/runs", **params)
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "INVALID_INPUT"


def test_a_tag_matches_whole_tags_only_nul_and_escapes_included(api, workspace, workflow):
    """The tag filter (jsonb containment on PostgreSQL, the JSON text on SQLite) finds a tag
    exactly: not a part of one, not a tag of another run; a NUL, a quote or the stored escape
    of a NUL in a tag is matched as written."""
    tags = {"plain": ["scale", "t7"], "nul": ["a\u0000b"], "quote": ['say "t7"'], "esc": ["a\uffff0b"]}
    for run_id, run_tags in tags.items():
        actions.do_start_run(
            workspace=workspace, workflow=workflow, actor="user:t", run_id=run_id, tags=run_tags
        )
    assert _all(api, "/api/runs", tag="t7")[0] == ["plain"]
    assert _all(api, "/api/runs", tag="a\u0000b")[0] == ["nul"]
    assert _all(api, "/api/runs", tag="a\uffff0b")[0] == ["esc"]
    assert _all(api, "/api/runs", tag='say "t7"')[0] == ["quote"]
    assert _all(api, "/api/runs", tag="t")[0] == []
