"""The read-replica router (workbench/replica.py): which reads go to the `replica` alias.

The decisions are checked without a replica; the end-to-end test needs one configured:
`DATABASE_REPLICA_URL` naming the same database as `DATABASE_URL` (the settings make it a TEST
MIRROR of `default`, so both aliases reach the one test database), e.g.

    DATABASE_URL="postgres://postgres@127.0.0.1:5432/test?test_name=test_x" \\
    DATABASE_REPLICA_URL="postgres://postgres@127.0.0.1:5432/test" pytest tests/ops/test_replica_router.py
"""

from __future__ import annotations

import time

import pytest
from django.conf import settings
from django.db import connections, transaction
from django.http import HttpResponse
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext

from workbench import replica
from workbench.replica import PIN_COOKIE, ReplicaReadMiddleware, ReplicaRouter, use_replica


@pytest.fixture
def configured(monkeypatch):
    monkeypatch.setattr(replica, "replica_configured", lambda: True)


def test_without_a_replica_nothing_is_routed():
    request = RequestFactory().get("/runs/")
    assert "replica" in settings.DATABASES or not replica.request_may_read_replica(request)


@pytest.mark.parametrize(
    ("method", "path", "extra", "cookie", "expected"),
    [
        ("get", "/runs/", {}, None, True),  # a page
        ("get", "/runs/inbox/", {}, None, True),  # a list
        ("head", "/ledger/", {}, None, True),
        ("post", "/runs/", {}, None, False),  # a write
        ("get", "/api/runs", {}, None, False),  # SDK clients read what they appended
        ("get", "/runs/", {"HTTP_AUTHORIZATION": "Bearer x"}, None, False),
        ("get", "/mcp", {}, None, False),
        ("get", "/live/metrics", {}, None, False),
        ("get", "/accounts/login/", {}, None, False),
        ("get", "/runs/", {}, "future", False),  # this browser wrote a moment ago
        ("get", "/runs/", {}, "past", True),  # the pin ran out
        ("get", "/runs/", {}, "garbage", True),
    ],
)
def test_request_decisions(configured, method, path, extra, cookie, expected):
    request = getattr(RequestFactory(), method)(path, **extra)
    if cookie == "future":
        request.COOKIES[PIN_COOKIE] = f"{time.time() + 3:.3f}"
    elif cookie == "past":
        request.COOKIES[PIN_COOKIE] = f"{time.time() - 1:.3f}"
    elif cookie:
        request.COOKIES[PIN_COOKIE] = cookie
    assert replica.request_may_read_replica(request) is expected


@pytest.mark.django_db(transaction=True)  # not inside the test case's own transaction
def test_router_decisions(configured):
    from django.contrib.auth import get_user_model
    from django.contrib.sessions.models import Session

    from runs.models import Event, Run

    router = ReplicaRouter()
    assert router.db_for_read(Run) is None  # outside a replica-allowed request: the primary
    with use_replica():
        assert router.db_for_read(Run) == "replica"
        assert router.db_for_read(Event) == "replica"
        assert router.db_for_read(get_user_model()) is None  # logins are seen at once
        assert router.db_for_read(Session) is None
        with transaction.atomic():
            assert router.db_for_read(Run) is None  # reads that decide a write
        assert router.db_for_read(Run) == "replica"
        assert router.db_for_write(Run) == "default"
        assert router.db_for_read(Run) is None  # the request wrote: it reads its own writes
    assert router.allow_migrate("replica", "runs") is False
    assert router.allow_migrate("default", "runs") is None


def test_a_write_pins_the_browser_to_the_primary(configured, settings):
    settings.REPLICA_PIN_SECONDS = 4
    seen = []

    def view(request):
        seen.append(replica.reading_replica())
        return HttpResponse("ok")

    middleware = ReplicaReadMiddleware(view)
    response = middleware(RequestFactory().post("/runs/x/annotations/"))
    pinned = float(response.cookies[PIN_COOKIE].value)
    assert time.time() + 3 < pinned <= time.time() + 4.1
    assert response.cookies[PIN_COOKIE]["httponly"]
    page = RequestFactory().get("/runs/")
    page.COOKIES[PIN_COOKIE] = response.cookies[PIN_COOKIE].value
    assert PIN_COOKIE not in middleware(page).cookies  # reads never pin
    fresh = middleware(RequestFactory().get("/runs/"))
    assert PIN_COOKIE not in fresh.cookies
    assert seen == [False, False, True]  # the post, the pinned page, an unpinned page
    assert not replica.reading_replica()  # nothing leaks out of a request


needs_replica = pytest.mark.skipif(
    "replica" not in settings.DATABASES, reason="DATABASE_REPLICA_URL is not set (see the module doc)"
)


@needs_replica
@pytest.mark.django_db(transaction=True, databases=["default", "replica"])
def test_pages_read_the_replica_until_the_browser_writes(client, workspace, alice, workflow):
    from runs import actions

    assert settings.DATABASES["replica"]["TEST"]["MIRROR"] == "default"
    actions.do_start_run(workspace=workspace, workflow=workflow, actor="user:alice", run_id="run_on_replica")
    client.force_login(alice)
    with CaptureQueriesContext(connections["replica"]) as on_replica:
        response = client.get("/runs/")
    assert response.status_code == 200 and b"run_on_replica" in response.content
    assert any('"runs_run"' in q["sql"] for q in on_replica.captured_queries)
    # A browser that just wrote: its next page reads the primary only.
    client.cookies[PIN_COOKIE] = f"{time.time() + 5:.3f}"
    with CaptureQueriesContext(connections["replica"]) as on_replica:
        with CaptureQueriesContext(connections["default"]) as on_primary:
            response = client.get("/runs/")
    assert response.status_code == 200 and b"run_on_replica" in response.content
    assert on_replica.captured_queries == []
    assert any('"runs_run"' in q["sql"] for q in on_primary.captured_queries)
    # The API never reads the replica.
    with CaptureQueriesContext(connections["replica"]) as on_replica:
        client.get("/api/runs")
    assert on_replica.captured_queries == []
