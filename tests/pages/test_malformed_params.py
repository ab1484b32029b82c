"""Query values a page cannot use are treated as absent, never a 500 (issue 12, low)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.pages.conftest import login

HUGE = "9" * 20


@pytest.mark.django_db
@pytest.mark.parametrize(
    "query",
    ["?to=9999-12-31", "?from=9999-12-31", "?from=0001-01-01&to=9999-12-31", "?to=0001-01-01"],
)
def test_ledger_date_edges_answer(client, alice, query):
    login(client, alice)
    assert client.get(reverse("runs:ledger") + query).status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["at", "after", "before", "limit"])
def test_timeline_integers_beyond_safe_range_answer(client, alice, run, name):
    login(client, alice)
    url = reverse("runs:timeline", args=[run.run_id])
    for value in (HUGE, f"-{HUGE}"):
        assert client.get(f"{url}?{name}={value}", HTTP_HX_REQUEST="true").status_code == 200
        assert client.get(reverse("runs:detail", args=[run.run_id]) + f"?{name}={value}").status_code == 200
