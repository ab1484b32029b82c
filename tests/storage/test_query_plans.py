"""EXPLAIN on PostgreSQL: every page query of a workspace (runs list with each filter and the text
search, both its paths (the bounded walk of a broad term, the trigram indexes of a rare one), its
next page, the inbox, the pending-gate count, the workflow menu, the workspace and run
ledgers, the run page's timeline and gates) reads ``runs_run`` and ``runs_event`` through an index,
never a sequential scan, on a dataset big enough (and ANALYZEd) for the planner to prefer an index
whenever one serves. The other lists (tokens, members, a webhook's deliveries, a run's notes and
annotations page), on small tables, are checked with ``enable_seqscan`` off: a sequential scan then
means that no index serves the query. Plans are checked, not times. Skipped on SQLite."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.models import Run, Workspace
from runs.selectors import ledger as ledger_selectors
from runs.selectors import run_list, runs

pytestmark = pytest.mark.django_db

RUNS_PER_WORKSPACE = 6000
EVENTS_PER_RUN = 8
WORKSPACES = 3

_BODY = (
    """'{"id":"evt_' || r.id || '_' || s || '","runId":"run_' || r.id || '","ts":"2026-03-01T10:00:00.000Z",'"""
    """ || '"type":"model_io","direction":"response","provider":"openai","model":"m",'"""
    """ || '"usage":{"inputTokens":10,"outputTokens":5},"cost":{"amount":0.001,"currency":"USD"},'"""
    """ || '"summary":"answer number ' || (r.id * 7 + s) || '"}'"""
)


def _build() -> Workspace:
    """WORKSPACES workspaces x RUNS_PER_WORKSPACE runs x EVENTS_PER_RUN events, in SQL (seconds)."""
    spaces = [Workspace.objects.create(slug=f"plan-{i}", name=f"plan {i}") for i in range(WORKSPACES)]
    with connection.cursor() as cursor:
        for ws in spaces:
            cursor.execute(
                """
                INSERT INTO runs_run (workspace_id, run_id, workflow_id, workflow_version, title, status,
                    started_at, tags, subject, doc, state, revision, last_seq, has_engine, pending_gates,
                    rejected_gates, event_count, model_calls, total_tokens, cost_totals, created_by,
                    created_at, updated_at)
                SELECT %s, 'run_' || g, 'wf-' || (g %% 20), 1, 'Run ' || g,
                    (ARRAY['running','completed','failed','cancelled'])[1 + g %% 4],
                    TIMESTAMP WITH TIME ZONE '2026-01-01' + g * INTERVAL '1 minute', ('["t' || (g %% 50) || '"]')::jsonb,
                    NULL, '{"id":"run_' || g || '"}', '{}', 8, 8, true,
                    CASE WHEN g %% 97 = 1 THEN 1 ELSE 0 END, CASE WHEN g %% 89 = 2 THEN 1 ELSE 0 END,
                    8, 8, 120, '{}'::jsonb, '', now(), now()
                FROM generate_series(1, %s) AS g
                """,
                [ws.pk, RUNS_PER_WORKSPACE],
            )
        cursor.execute(
            f"""
            INSERT INTO runs_event (run_id, seq, event_id, type, ts, step_id, correlation_id, span_ref, body,
                actor, recorded_at)
            SELECT r.id, s, 'evt_' || r.id || '_' || s,
                CASE WHEN s %% 2 = 0 THEN 'model_io' ELSE 'step_started' END, '2026-03-01T10:00:00.000Z',
                'step-' || (s %% 3), '', '', {_BODY}, '', now()
            FROM runs_run r, generate_series(1, %s) AS s
            """,
            [EVENTS_PER_RUN],
        )
        cursor.execute("ANALYZE runs_run")
        cursor.execute("ANALYZE runs_event")
    return spaces[1]


def _queries(
    workspace: Workspace,
    *,
    run_id: str = "run_4242",
    workflow: str = "wf-7",
    tag: str = "t7",
    ledger: tuple[date, date] = (date(2026, 1, 1), date(2026, 1, 31)),
    words: tuple[str, str, str] = ("answer number 4242", "answer number", "Run 12"),
) -> list[tuple[str, list[str]]]:
    """(name, the SQL each page query sent), from the selectors the pages call (the defaults fit
    :func:`_build`'s data; bench/bench_scale.py --explain passes its own for the 1M workspace)."""
    out = []

    def capture(name, fn):
        with CaptureQueriesContext(connection) as ctx:
            fn()
        out.append((name, [q["sql"] for q in ctx.captured_queries]))

    f = run_list.RunListFilters
    _, cursor = run_list.runs_page(workspace, f(), limit=50)
    for name, filters in [
        ("runs list", f()),
        ("status filter", f(status="completed")),
        ("rejected filter", f(status="rejected")),
        ("workflow filter", f(workflow=workflow)),
        ("tag filter", f(tag=tag)),
        (
            "start range filter",
            f(
                started_after=datetime(2026, 1, 2, tzinfo=UTC),
                started_before=datetime(2026, 1, 3, tzinfo=UTC),
            ),
        ),
        ("trace id filter (the run of a trace)", f(trace_id="0" * 31 + "1")),
        ("text search", f(q=words[0])),
        ("broad text search", f(q=words[1])),
        ("filtered search", f(status="failed", workflow=workflow, q=words[2])),
    ]:
        capture(name, lambda filters=filters: run_list.runs_page(workspace, filters, limit=50))
        capture(
            name + " (next page)",
            lambda filters=filters: run_list.runs_page(workspace, filters, cursor=cursor, limit=50),
        )
    for sort in [*run_list.RUN_SORTS, *(f"-{key}" for key in run_list.RUN_SORTS)]:
        if sort == run_list.DEFAULT_SORT:
            continue
        filters = f(sort=sort)
        _, sorted_cursor = run_list.runs_page(workspace, filters, limit=50)
        capture(f"sorted by {sort}", lambda filters=filters: run_list.runs_page(workspace, filters, limit=50))
        capture(
            f"sorted by {sort} (next page)",
            lambda filters=filters, c=sorted_cursor: run_list.runs_page(
                workspace, filters, cursor=c, limit=50
            ),
        )
    capture("inbox", lambda: run_list.inbox_page(workspace, limit=200))
    capture("pending gate count", lambda: run_list.pending_gate_count(workspace))
    capture("workflow menu", lambda: run_list.workflow_ids(workspace))
    capture(
        "workspace ledger",
        lambda: ledger_selectors.workspace_ledger_data(workspace, first=ledger[0], last=ledger[1]),
    )
    run = Run.objects.for_workspace(workspace).get(run_id=run_id)
    capture("run ledger", lambda: ledger_selectors.run_ledger_view(run))
    capture(
        "run ledger responses, a later page", lambda: ledger_selectors.calls_after(run, after=4, limit=100)
    )
    capture("run page timeline", lambda: runs.timeline_page(run))
    capture("run page gates", lambda: runs.gate_history(run, limit=20))
    capture("timeline search", lambda: runs.timeline_page(run, filters=runs.TimelineFilters(q="answer")))
    return out


SEQ_SCAN = re.compile(r"Seq Scan on (runs_run|runs_event)\b")


def sequential_scans(queries: list[tuple[str, list[str]]]) -> list[str]:
    """The page queries whose plan reads runs_run or runs_event with a sequential scan (or whose next
    page is not bounded by its cursor), each with its SQL and plan."""
    bad = []
    with connection.cursor() as cursor:
        for name, statements in queries:
            assert statements, name
            for sql in statements:
                cursor.execute("EXPLAIN " + sql)
                plan = "\n".join(row[0] for row in cursor.fetchall())
                if SEQ_SCAN.search(plan):
                    bad.append(f"{name}: {sql}\n{plan}")
                elif name.startswith("sorted by") and name.endswith("(next page)"):
                    sort = name.split()[2]
                    bound = f"{run_list.RUN_SORTS[sort.lstrip('-')]} {'>=' if sort.startswith('-') else '<='}"
                    if bound not in plan:
                        bad.append(f"{name}: the cursor must bound the index range\n{sql}\n{plan}")
                elif name.endswith("(next page)") and "search" not in name and "started_at <=" not in plan:
                    bad.append(f"{name}: the cursor must bound the index range\n{sql}\n{plan}")
    return bad


def test_page_queries_use_indexes_not_sequential_scans():
    if connection.vendor != "postgresql":
        pytest.skip("query plans are checked on PostgreSQL")
    queries = _queries(_build())
    bad = sequential_scans(queries)
    assert not bad, "\n\n".join(bad)
    # a rare term: the model calls' side is read from the trigram index of their searchable text
    with connection.cursor() as cursor:
        plans = []
        for sql in dict(queries)["text search"]:
            cursor.execute("EXPLAIN " + sql)
            plans.append("\n".join(row[0] for row in cursor.fetchall()))
    assert any("event_model_io_text_trgm" in plan for plan in plans), plans


LIST_TABLES = re.compile(
    r"Seq Scan on (runs_run|runs_event|accounts_apitoken|runs_membership|auth_user|runs_delivery)\b"
)


def _list_queries(workspace: Workspace) -> list[tuple[str, list[str]]]:
    from django.contrib.auth import get_user_model

    from accounts.tokens import create_token, tokens_page
    from runs.actions.workspaces import add_member
    from runs.models import Delivery, Membership, Webhook
    from runs.selectors import annotations, keyset, webhooks

    for i in range(30):
        create_token(workspace=workspace, name=f"t{i}", scopes=["read"])
        user = get_user_model().objects.create_user(f"member-{i:02d}", password="pw-123456789")
        add_member(workspace, user, "viewer")
    hook = Webhook.objects.create(
        public_id="wh_plan", workspace=workspace, url="https://h.example/", secret="s"
    )
    Delivery.objects.bulk_create(
        Delivery(
            public_id=f"msg_plan_{i}",
            workspace=workspace,
            webhook=hook,
            channel="webhook",
            event_type="gate.requested",
            payload="{}",
            next_attempt_at="2026-01-01T00:00:00Z",
        )
        for i in range(30)
    )
    run = Run.objects.for_workspace(workspace).get(run_id="run_4242")
    doc: dict = {}  # the header annotations come from the run document (no query)
    out = []

    def capture(name, fn):
        with CaptureQueriesContext(connection) as ctx:
            fn()
        out.append((name, [q["sql"] for q in ctx.captured_queries]))

    _, token_cursor = tokens_page(workspace, limit=10)
    capture("tokens", lambda: tokens_page(workspace, limit=10))
    capture("tokens (next page)", lambda: tokens_page(workspace, cursor=token_cursor, limit=10))
    members = Membership.objects.filter(workspace=workspace).select_related("user")
    capture("members", lambda: keyset.by_name(members, name="user__username", cursor="", limit=10))
    capture(
        "members (next page)",
        lambda: keyset.by_name(members, name="user__username", cursor="member-09", limit=10),
    )
    _, delivery_cursor = webhooks.deliveries_page(hook, limit=10)
    capture("deliveries", lambda: webhooks.deliveries_page(hook, limit=10))
    capture(
        "deliveries (next page)", lambda: webhooks.deliveries_page(hook, cursor=delivery_cursor, limit=10)
    )
    capture("run page notes", lambda: annotations.run_page_preview(run, doc))
    capture("annotations page", lambda: annotations.annotations_page(run, doc, page=1))
    capture("annotations next page", lambda: annotations.annotations_page(run, doc, page=2, after=4))
    capture("annotations previous page", lambda: annotations.annotations_page(run, doc, page=1, before=6))
    return out


def test_list_pages_use_indexes_not_sequential_scans():
    if connection.vendor != "postgresql":
        pytest.skip("query plans are checked on PostgreSQL")
    workspace = _build()
    bad = []
    with connection.cursor() as cursor:
        queries = _list_queries(workspace)
        cursor.execute("ANALYZE")
        cursor.execute("SET enable_seqscan = off")
        try:
            for name, statements in queries:
                assert statements, name
                for sql in statements:
                    cursor.execute("EXPLAIN " + sql)
                    plan = "\n".join(row[0] for row in cursor.fetchall())
                    if LIST_TABLES.search(plan):
                        bad.append(f"{name}: {sql}\n{plan}")
        finally:
            cursor.execute("SET enable_seqscan = on")
    assert not bad, "\n\n".join(bad)
