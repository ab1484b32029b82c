"""Tokens, members and a webhook's deliveries page by keyset: following the next links lists every
row once, in the list's order; a cursor that does not parse answers 400 and changes nothing."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from django.utils import timezone

from accounts.models import ApiToken
from accounts.tokens import create_token
from runs.actions.workspaces import add_member
from runs.models import Delivery, Webhook
from tests.api.conftest import BearerClient

pytestmark = pytest.mark.django_db


def _follow(client, url: str, row: str, more: str) -> list[list[str]]:
    pages = []
    while url:
        response = client.get(url)
        assert response.status_code == 200, url
        html = response.content.decode()
        pages.append(re.findall(row, html))
        link = re.search(rf'<a href="([^"]+)">{more}', html)
        url = unescape(link.group(1)) if link else ""
    return pages


def test_tokens_page_by_keyset(client, alice, workspace, monkeypatch):
    monkeypatch.setattr("accounts.tokens.TOKENS_PER_PAGE", 3)
    for i in range(8):
        create_token(workspace=workspace, name=f"tok-{i}", scopes=["read"])
    ApiToken.objects.filter(name="tok-5").update(created_at=ApiToken.objects.get(name="tok-4").created_at)
    client.force_login(alice)
    pages = _follow(client, "/workspace/tokens/", r"<td>(tok-\d)</td>", "Older tokens")
    assert [len(p) for p in pages] == [3, 3, 2]
    newest_first = list(ApiToken.objects.order_by("-created_at", "-id").values_list("name", flat=True))
    assert [n for p in pages for n in p] == newest_first
    assert client.get("/workspace/tokens/?cursor=nonsense").status_code == 400
    assert client.get("/workspace/tokens/?cursor=2026-01-01T00:00:00%2B00:00|0").status_code == 400


def test_members_page_by_username(client, alice, workspace, django_user_model, monkeypatch):
    monkeypatch.setattr("runs.pages.members.MEMBERS_PER_PAGE", 4)
    for name in ["zed", "amy", "bo|b", "carl", "dora", "émile", "fay"]:
        add_member(workspace, django_user_model.objects.create_user(name, password="pw-123456789"), "viewer")
    client.force_login(alice)
    pages = _follow(client, "/members/", r"<tr>\s*<td>([^<]+)</td>", "More members")
    names = [unescape(n) for p in pages for n in p]
    in_db_order = list(django_user_model.objects.order_by("username").values_list("username", flat=True))
    assert names == [n for n in in_db_order if n in names] and len(pages) == 2
    assert sorted(names) == sorted([*in_db_order])  # every member once (alice too)
    assert client.get("/members/?after=" + "x" * 400).status_code == 400


def test_deliveries_api_pages_by_link(workspace):
    hook = Webhook.objects.create(
        public_id="wh_keyset", workspace=workspace, url="https://h.example/x", secret="s"
    )
    now = timezone.now()
    for i in range(120):
        Delivery.objects.create(
            public_id=f"msg_{i:03d}",
            workspace=workspace,
            webhook=hook,
            channel="webhook",
            event_type="gate.requested",
            payload="{}",
            next_attempt_at=now,
        )
    Delivery.objects.filter(public_id__in=["msg_010", "msg_011", "msg_012"]).update(
        created_at=now - timedelta(days=1)
    )
    api = BearerClient(create_token(workspace=workspace, name="m", scopes=["read", "manage"]).secret)
    seen, url = [], "/api/webhooks/wh_keyset/deliveries"
    while url:
        response = api.get(url)
        assert response.status_code == 200, response.content
        seen += [d["id"] for d in response.json()]
        link = response.headers.get("Link", "")
        found = re.search(r'<([^>]+)>; rel="next"', link)
        url = found.group(1) if found else ""
    expected = list(Delivery.objects.order_by("-created_at", "-id").values_list("public_id", flat=True))
    assert seen == expected and len(seen) == 120
    bad = api.get("/api/webhooks/wh_keyset/deliveries?cursor=x|y")
    assert bad.status_code == 400 and bad.json()["code"] == "INVALID_INPUT"
