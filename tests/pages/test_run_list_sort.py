"""The runs list's columns (started, duration, cost, tokens, errors) and its sorts: headers link
with aria-sort, the sort stays in the URL with the filters, keyset pages follow each sort in both
directions, a sort the list does not offer is refused with a code."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from runs.models import Run
from runs.selectors import run_list as run_selectors

pytestmark = pytest.mark.django_db


@pytest.fixture
def many(workspace):
    base = datetime(2026, 3, 1, tzinfo=UTC)
    rows = []
    for i in range(23):
        rows.append(
            Run(
                workspace=workspace,
                run_id=f"r{i:02d}",
                workflow_id="wf" if i % 2 else "other",
                status="completed",
                started_at=base + timedelta(minutes=i),
                ended_at=base + timedelta(minutes=i, seconds=(i * 7) % 11),
                duration_ms=((i * 7) % 11) * 1000,
                cost_amount=(i % 5) * 0.5,
                total_tokens=(i * 13) % 17,
                error_count=i % 3,
                doc="{}",
                state="{}",
            )
        )
    Run.objects.bulk_create(rows)
    return rows


def _ids(html: str) -> list[str]:
    return re.findall(r'name="run" value="([^"]+)"', html)


@pytest.mark.parametrize("key", ["started", "duration", "cost", "tokens", "errors"])
@pytest.mark.parametrize("ascending", [False, True])
def test_every_sort_pages_through_every_run_in_order(workspace, many, key, ascending):
    column = run_selectors.RUN_SORTS[key]
    sort = f"-{key}" if ascending else key
    filters = run_selectors.RunListFilters(sort=sort)
    seen, cursor = [], ""
    while True:
        page, cursor = run_selectors.runs_page(workspace, filters, cursor=cursor, limit=5)
        seen += page
        if not cursor:
            break
    assert len(seen) == 23 and len({r.pk for r in seen}) == 23
    keys = [(getattr(r, column), r.pk) for r in seen]
    assert keys == sorted(keys, reverse=not ascending)


def test_headers_link_the_sorts_with_aria_sort(client, alice, many):
    client.force_login(alice)
    html = client.get("/runs/", {"sort": "cost", "workflow": "wf"}).content.decode()
    head = html[html.index("<thead>") : html.index("</thead>")]
    assert re.search(r'<th scope="col" class="num" aria-sort="descending"><a href="[^"]*sort=-cost', head)
    assert 'aria-sort="ascending"' not in head
    # the other headers keep the filter and start at the top
    tokens = re.search(r'href="([^"]*)" data-sort="tokens"', head).group(1).replace("&amp;", "&")
    assert "workflow=wf" in tokens and "cursor" not in tokens
    # the filter form keeps the sort
    assert '<input type="hidden" name="sort" value="cost">' in html
    rows = _ids(html)
    costs = {r.run_id: r.cost_amount for r in many}
    assert [costs[i] for i in rows] == sorted((costs[i] for i in rows), reverse=True)
    assert all(int(i[1:]) % 2 for i in rows)  # workflow wf only
    ascending = client.get("/runs/", {"sort": "-cost"}).content.decode()
    assert 'aria-sort="ascending"' in ascending
    # tokens and errors are columns
    assert re.search(r'<th scope="col" class="num"><a [^>]*data-sort="errors">Errors</a></th>', head)


def test_the_next_page_link_keeps_the_sort(client, alice, workspace):
    base = datetime(2026, 3, 1, tzinfo=UTC)
    Run.objects.bulk_create(
        Run(
            workspace=workspace,
            run_id=f"p{i}",
            workflow_id="wf",
            status="completed",
            started_at=base,
            total_tokens=i,
            doc="{}",
            state="{}",
        )
        for i in range(60)
    )
    client.force_login(alice)
    first = client.get("/runs/", {"sort": "tokens"}).content.decode()
    link = re.search(r'href="([^"]*cursor=[^"]*)">Older runs', first).group(1).replace("&amp;", "&")
    assert "sort=tokens" in link
    second = client.get(link).content.decode()
    tokens = [int(i[1:]) for i in _ids(first) + _ids(second)]
    assert tokens == list(range(59, -1, -1))


def test_a_sort_not_offered_is_refused_with_a_code(client, alice):
    client.force_login(alice)
    response = client.get("/runs/", {"sort": "title"})
    assert response.status_code == 400 and b"INVALID_SORT" in response.content
    assert client.get("/runs/", {"sort": "cost", "cursor": "x|1"}).status_code == 400
