"""Who sees what: sign-in, the public demo, roles, and the outsider who gets 404 everywhere."""

from __future__ import annotations

import pytest

from tests.pages.conftest import login

pytestmark = pytest.mark.django_db

RUN_GETS = [
    "/runs/{id}/",
    "/runs/{id}/timeline/",
    "/runs/{id}/events/1/",
    "/runs/{id}/graph/",
    "/runs/{id}/status/",
    "/runs/{id}/gates/",
    "/runs/{id}/artifacts/",
    "/runs/{id}/artifacts/diff/?key=notes&a=1&b=1",
    "/runs/{id}/rules/",
    "/runs/{id}/ledger/",
    "/runs/{id}/export/",
]
RUN_POSTS = [
    "/runs/{id}/gates/resolve/",
    "/runs/{id}/artifacts/",
    "/runs/{id}/rules/",
    "/runs/{id}/cancel/",
]


def test_pages_need_sign_in(client, run):
    for url in [
        "/runs/",
        "/runs/inbox/",
        "/ledger/",
        "/import/",
        "/members/",
        *[u.format(id=run.run_id) for u in RUN_GETS],
    ]:
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/"), url


def test_sign_in_and_out(client, alice):
    response = client.post("/accounts/login/", {"username": "alice", "password": "alice-password-123"})
    assert response.status_code == 302 and response["Location"] == "/runs/"
    page = client.get("/runs/")
    assert b"Sign out" in page.content and b'name="csrfmiddlewaretoken"' in page.content
    assert client.post("/accounts/logout/").status_code == 302
    assert client.get("/runs/").status_code == 302
    bad = client.post("/accounts/login/", {"username": "alice", "password": "nope"})
    assert bad.status_code == 200 and b"didn't match" in bad.content


def test_outsider_gets_404_on_every_run_url(client, charlie, run):
    login(client, charlie)
    for url in RUN_GETS:
        assert client.get(url.format(id=run.run_id)).status_code == 404, url
    for url in RUN_POSTS:
        assert client.post(url.format(id=run.run_id), {"decision": "approved"}).status_code == 404, url
    listing = client.get("/runs/")
    assert run.run_id.encode() not in listing.content


def test_missing_run_is_404(client, alice, db):
    login(client, alice)
    assert client.get("/runs/nope/").status_code == 404


def test_viewer_sees_no_write_buttons_and_cannot_post(client, vera, run):
    login(client, vera)
    page = client.get(f"/runs/{run.run_id}/").content.decode()
    assert "review" in page and 'value="approved"' not in page and "Cancel run" not in page
    assert (
        client.post(
            f"/runs/{run.run_id}/gates/resolve/",
            {"decision": "approved", "step_id": "review", "gate": "PAUSE_BEFORE"},
        ).status_code
        == 403
    )
    assert client.post(f"/runs/{run.run_id}/cancel/").status_code == 403
    assert client.post(f"/runs/{run.run_id}/artifacts/", {"key": "notes", "data": "{}"}).status_code == 403
    artifacts = client.get(f"/runs/{run.run_id}/artifacts/").content.decode()
    assert "Save new version" not in artifacts
    assert client.get("/members/").status_code == 403


def test_reviewer_sees_gate_buttons(client, bob, run):
    login(client, bob)
    page = client.get(f"/runs/{run.run_id}/").content.decode()
    assert 'value="approved"' in page and 'value="rejected"' in page and 'value="edited"' in page


def test_csrf_is_enforced_on_posts(alice, run):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post(
        f"/runs/{run.run_id}/gates/resolve/",
        {"decision": "approved", "step_id": "review", "gate": "PAUSE_BEFORE"},
    )
    assert response.status_code == 403
    page = client.get(f"/runs/{run.run_id}/").content.decode()
    assert 'hx-headers=\'{"X-CSRFToken": "' in page


def test_public_demo_renders_read_only_without_sign_in(client, db, workflow, alice):
    from runs import actions
    from runs.actions.workspaces import get_or_create_workspace
    from runs.web.request import DEMO_WORKSPACE

    demo = get_or_create_workspace(DEMO_WORKSPACE)  # the public snapshot's own workspace
    actions.do_start_run(
        workspace=demo, workflow=workflow, actor="seed", run_id="run_demo_jobsearch", tags=["demo"]
    )
    page = client.get("/runs/demo")
    assert page.status_code == 200
    html = page.content.decode()
    assert "run_demo_jobsearch" in html and "Public demo" in html
    assert 'value="approved"' not in html and "Cancel run" not in html
    assert client.get("/runs/demo/timeline/", HTTP_HX_REQUEST="true").status_code == 200
    assert client.get("/runs/demo/artifacts/").status_code == 200
    assert client.get("/runs/demo/events/1/", HTTP_HX_REQUEST="true").status_code in (200, 404)
    assert client.post("/runs/demo/gates/resolve/", {"decision": "approved"}).status_code == 302  # to sign-in
    # even a signed-in owner of the demo workspace gets no buttons on the public page
    login(client, alice)
    assert 'value="approved"' not in client.get("/runs/demo").content.decode()


def test_workspace_switcher_is_membership_scoped(client, alice, other_workspace, run):
    from runs.actions.workspaces import add_member, get_or_create_workspace

    login(client, alice)
    assert client.post("/workspace/switch/", {"workspace": other_workspace.slug}).status_code == 404
    second = get_or_create_workspace("second")
    add_member(second, alice, "viewer")
    assert client.post("/workspace/switch/", {"workspace": "second"}).status_code == 302
    assert run.run_id.encode() not in client.get("/runs/").content
    assert client.get(f"/runs/{run.run_id}/").status_code == 404  # runs follow the chosen workspace
    client.post("/workspace/switch/", {"workspace": "acme"})
    assert client.get(f"/runs/{run.run_id}/").status_code == 200


def test_members_page_for_owners(client, alice, bob, vera):
    login(client, alice)
    page = client.get("/members/").content.decode()
    assert "bob" in page and "vera" in page
    client.post("/members/", {"op": "role", "username": "vera", "role": "reviewer"})
    from runs.models import Membership

    assert Membership.objects.get(user=vera).role == "reviewer"
    client.post("/members/", {"op": "remove", "username": "bob"})
    assert not Membership.objects.filter(user=bob).exists()
    client.post("/members/", {"op": "role", "username": "alice", "role": "viewer"})
    assert Membership.objects.get(user=alice).role == "owner"
