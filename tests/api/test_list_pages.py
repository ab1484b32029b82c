"""Every list of the REST API pages by keyset (issue 53): ``?limit=`` rows, the ``Link`` header's
``rel="next"`` to the rest (the same query, an opaque cursor), every row once across the pages,
no fixed stop; a cursor the list did not give answers 400 ``INVALID_INPUT``."""

from __future__ import annotations

import re

import pytest

from accounts.tokens import create_token
from tests.api.conftest import BearerClient

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(workspace) -> BearerClient:
    """An owner's token: webhooks and monitors need the manage scope."""
    scopes = ["read", "write", "review", "manage"]
    return BearerClient(create_token(workspace=workspace, name="lists", scopes=scopes).secret)


QUEUE_CONFIG = [{"name": "ok", "dataType": "BOOLEAN", "description": "fine?"}]

LISTS = {
    # path: (creation body of row i, how the list's JSON gives its rows, a row's key)
    "/api/datasets": (lambda i: {"name": f"set {i}"}, lambda body: body["datasets"], "name"),
    "/api/prompts": (lambda i: {"name": f"prompt-{i}", "body": "hi"}, lambda body: body, "name"),
    "/api/webhooks": (
        lambda i: {"url": f"https://h{i}.example/hook", "events": ["gate.requested"]},
        lambda body: body,
        "url",
    ),
    "/api/monitors": (
        lambda i: {"name": f"m{i}", "metric": "cost_day", "alert": 1},
        lambda body: body,
        "name",
    ),
    "/api/review/queues": (
        lambda i: {"name": f"q{i}", "scoreConfigs": QUEUE_CONFIG},
        lambda body: body,
        "name",
    ),
}


def _next(response) -> str | None:
    found = re.search(r'<([^>]+)>; rel="next"', response.get("Link", ""))
    return found.group(1) if found else None


@pytest.mark.parametrize("path", sorted(LISTS))
def test_each_list_pages_to_the_end(api, path):
    body, rows_of, key = LISTS[path]
    for i in range(5):
        created = api.post(path, body(i))
        assert created.status_code == 201, created.content
    seen, pages = [], 0
    response = api.get(path, limit="2")
    while True:
        assert response.status_code == 200, response.content
        rows = rows_of(response.json())
        assert len(rows) <= 2
        seen += [row[key] for row in rows]
        pages += 1
        url = _next(response)
        if url is None:
            break
        assert "limit=2" in url and "cursor=" in url
        response = api.get(url)
    assert pages == 3 and len(seen) == len(set(seen)) == 5
    assert sorted(seen) == sorted(body(i)[key] for i in range(5))
    assert _next(api.get(path, limit="5")) is None
    refused = api.get(path, cursor="x" * 301)
    assert refused.status_code == 400 and refused.json()["code"] == "INVALID_INPUT"
