"""Prompt pages: the list, a prompt's versions, side-by-side diff, moving labels (protected ones ask
in the inbox), protecting labels (owners), deciding a promotion from the inbox; outsiders get 404."""

from __future__ import annotations

import re

import pytest

from runs.actions.permissions import ROLE_SCOPES
from runs.actions.prompts import do_protect_label, do_save_prompt_version
from runs.selectors import prompts as sel
from tests.pages.conftest import login

XSS = "<script>alert(1)</script>"


@pytest.fixture
def two_versions(workspace, bob):
    for text in ("Hello {{name}}", f"Hi {{{{name}}}} {XSS}"):
        do_save_prompt_version(
            workspace, name="team/greet", body=text, scopes=ROLE_SCOPES["reviewer"], user=bob
        )


def test_list_and_detail_show_versions_diff_and_escape(client, alice, two_versions):
    login(client, alice)
    listing = client.get("/prompts/")
    assert listing.status_code == 200 and b"team/greet" in listing.content
    page = client.get("/prompts/team/greet/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "Version 1 and version 2 side by side" in html
    assert XSS not in html and "&lt;script&gt;" in html
    assert 'class="add"' in html and 'class="del"' in html
    assert client.get("/prompts/team/greet/", {"a": "2", "b": "1"}).status_code == 200
    assert client.get("/prompts/team/greet/", {"a": "x", "b": "99999999999999999999"}).status_code == 200
    assert client.get("/prompts/nope/").status_code == 404


def test_viewers_cannot_move_labels_and_testers_move_unprotected_ones(
    client, vera, bob, two_versions, workspace
):
    login(client, vera)
    assert client.post("/prompts/team/greet/", {"label": "staging", "version": "1"}).status_code == 403
    assert sel.find_version(workspace, "team/greet", label="staging") is None
    login(client, bob)
    response = client.post("/prompts/team/greet/", {"label": "staging", "version": "1"})
    assert response.status_code == 302
    assert sel.find_version(workspace, "team/greet", label="staging").number == 1
    bad = client.post("/prompts/team/greet/", {"label": "latest", "version": "1"})
    assert bad.status_code == 400 and b"LABEL_RESERVED" in bad.content


def test_protected_label_goes_through_the_inbox(
    client, alice, bob, two_versions, workspace, django_user_model
):

    login(client, bob)
    assert client.post("/prompts/", {"op": "protect", "label": "production"}).status_code == 403
    login(client, alice)
    assert client.post("/prompts/", {"op": "protect", "label": "production"}).status_code == 302
    assert sel.protected_labels(workspace) == ["production"]
    login(client, bob)
    client.post("/prompts/team/greet/", {"label": "production", "version": "2", "note": "ship it"})
    assert sel.find_version(workspace, "team/greet") is None  # asked, not moved
    request = sel.pending_promotions(workspace)[0]
    inbox = client.get("/runs/inbox/").content.decode()
    assert (
        "Prompt promotions" in inbox and f"/promotions/{request.pk}/decide/" in inbox and "ship it" in inbox
    )
    client.post(f"/promotions/{request.pk}/decide/", {"decision": "approved"})  # their own: refused
    assert sel.find_version(workspace, "team/greet") is None
    login(client, alice)
    response = client.post(f"/promotions/{request.pk}/decide/", {"decision": "approved", "note": "ok"})
    assert response.status_code == 302 and response["Location"] == "/runs/inbox/"
    assert sel.find_version(workspace, "team/greet").number == 2
    request.refresh_from_db()
    assert request.decided_by == alice and request.requested_by == bob and request.decision_note == "ok"
    assert client.post(f"/promotions/{request.pk}/decide/", {"decision": "maybe"}).status_code == 302


def test_outsiders_get_404(client, charlie, two_versions, workspace, alice):
    do_protect_label(workspace, label="production", protected=True, scopes=ROLE_SCOPES["owner"], user=alice)
    from runs.actions.prompts import do_move_label

    req = do_move_label(
        workspace, name="team/greet", label="production", version=2, scopes=ROLE_SCOPES["owner"], user=alice
    ).request
    login(client, charlie)
    assert client.get("/prompts/team/greet/").status_code == 404
    assert client.post("/prompts/team/greet/", {"label": "x", "version": "1"}).status_code == 404
    assert client.post(f"/promotions/{req.pk}/decide/", {"decision": "approved"}).status_code == 404
    assert b"team/greet" not in client.get("/prompts/").content


PROMOTIONS_BADGE = 'nav-count-promotions"'


def test_the_navigation_counts_pending_promotions(client, alice, bob, vera, charlie, two_versions, workspace):
    from runs.actions.prompts import do_move_label

    login(client, alice)
    assert PROMOTIONS_BADGE not in client.get("/prompts/").content.decode()
    do_protect_label(workspace, label="production", protected=True, scopes=ROLE_SCOPES["owner"], user=alice)
    do_save_prompt_version(workspace, name="team/other", body="x", scopes=ROLE_SCOPES["reviewer"], user=bob)
    for name in ("team/greet", "team/other"):  # one request per prompt and label may wait
        do_move_label(
            workspace, name=name, label="production", version=1, scopes=ROLE_SCOPES["reviewer"], user=bob
        )
    for user in (alice, vera):  # everyone in the workspace sees what waits in the inbox
        login(client, user)
        html = client.get("/prompts/").content.decode()
        assert (
            PROMOTIONS_BADGE in html and '>2<span class="visually-hidden"> prompt promotions pending' in html
        )
    login(client, charlie)  # another workspace: nothing
    assert PROMOTIONS_BADGE not in client.get("/prompts/").content.decode()
    # Looking at the count moved nothing: the label waits for a decision.
    assert sel.find_version(workspace, "team/greet", label="production") is None
    login(client, alice)
    for request in sel.pending_promotions(workspace):
        client.post(f"/promotions/{request.pk}/decide/", {"decision": "rejected"})
    assert PROMOTIONS_BADGE not in client.get("/runs/inbox/").content.decode()


def test_the_promotion_card_shows_only_what_changed(client, alice, bob, workspace):
    from runs.actions.prompts import do_move_label

    config = {"model": "claude-haiku-4-5", "temperature": 0.2, "max_tokens": 800, "stop": ["\n\n"]}
    config.update({f"extra_{i}": i for i in range(30)})  # a config of many keys, most unchanged
    changed = {**config, "temperature": 0.7, "top_p": 0.9}
    del changed["stop"]
    reviewer = ROLE_SCOPES["reviewer"]
    for cfg in (config, changed):
        do_save_prompt_version(
            workspace, name="cfg", body="Same words {{x}}", config=cfg, scopes=reviewer, user=bob
        )
    do_move_label(workspace, name="cfg", label="production", version=1, scopes=reviewer, user=bob)
    do_protect_label(workspace, label="production", protected=True, scopes=ROLE_SCOPES["owner"], user=alice)
    do_move_label(workspace, name="cfg", label="production", version=2, scopes=reviewer, user=bob)
    login(client, alice)
    html = client.get("/runs/inbox/").content.decode()
    card = html[html.index('class="promotion"') :]
    card = card[: card.index("</article>")]
    assert "The messages are the same." in card and "extra_" not in card and "max_tokens" not in card
    rows = re.findall(r'<th scope="row" class="mono">([^<]+)</th><td>(\w+)</td>', card)
    assert rows == [("stop", "removed"), ("temperature", "changed"), ("top_p", "added")]
    assert '<td class="mono">0.2</td><td class="mono">0.7</td>' in card
