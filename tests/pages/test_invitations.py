"""Members join by invitation only: the owner invites, the invitee accepts. The members page does not
tell which usernames exist. Attacks are made with a fresh account (mallory), who owns nothing but
her personal workspace."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from runs.actions.permissions import Action, role_allows
from runs.models import Invitation, InvitationStatus, Membership
from tests.pages.conftest import login

pytestmark = pytest.mark.django_db


@pytest.fixture
def dave(django_user_model):
    """An account that is nobody's member yet."""
    return django_user_model.objects.create_user(
        "dave", email="Dave@Example.org", password="dave-password-123"
    )


@pytest.fixture
def mallory(django_user_model):
    return django_user_model.objects.create_user("mallory", password="mallory-password-123")


def _invite(client, invitee: str, role: str = "reviewer"):
    return client.post("/members/", {"op": "invite", "invitee": invitee, "role": role})


def _flash(client, response) -> list[str]:
    """The messages a POST left for the page it redirects to (shown there once, then gone)."""
    assert response.status_code == 302
    return [str(m) for m in client.get(response["Location"]).context["messages"]]


def _invitation_for(workspace, name: str) -> Invitation:
    return Invitation.objects.get(workspace=workspace, invitee__iexact=name)


def test_inviting_adds_nobody_until_the_invitee_accepts(client, alice, dave, workspace):
    response = _invite(login(client, alice), "dave")
    assert response.status_code == 302
    assert not Membership.objects.filter(workspace=workspace, user=dave).exists()
    invitation = _invitation_for(workspace, "dave")
    assert invitation.status == InvitationStatus.PENDING and invitation.role == "reviewer"

    dave_client = login(Client(), dave)  # signing in counts the invitations for the banner
    page = dave_client.get("/runs/")
    assert b'id="invitations-banner"' in page.content
    listing = dave_client.get("/workspace/invitations/")
    assert b"Acme" in listing.content and f"invitation-{invitation.pk}".encode() in listing.content

    accepted = dave_client.post(f"/workspace/invitations/{invitation.pk}/accept/")
    assert accepted.status_code == 302
    assert Membership.objects.get(workspace=workspace, user=dave).role == "reviewer"
    invitation.refresh_from_db()
    assert invitation.status == InvitationStatus.ACCEPTED
    assert b'id="invitations-banner"' not in dave_client.get("/runs/").content
    # answered once: a second answer finds nothing
    assert dave_client.post(f"/workspace/invitations/{invitation.pk}/accept/").status_code == 404


def test_a_declined_invitation_makes_no_member(client, alice, dave, workspace):
    _invite(login(client, alice), "dave")
    invitation = _invitation_for(workspace, "dave")
    assert login(Client(), dave).post(f"/workspace/invitations/{invitation.pk}/decline/").status_code == 302
    assert not Membership.objects.filter(workspace=workspace, user=dave).exists()
    invitation.refresh_from_db()
    assert invitation.status == InvitationStatus.DECLINED


def test_an_invitation_by_email_reaches_the_account_with_that_address(client, alice, dave, workspace):
    _invite(login(client, alice), "dave@example.ORG", "viewer")
    invitation = _invitation_for(workspace, "dave@example.org")
    dave_client = login(Client(), dave)
    assert dave_client.post(f"/workspace/invitations/{invitation.pk}/accept/").status_code == 302
    assert Membership.objects.get(workspace=workspace, user=dave).role == "viewer"


def test_the_owner_can_withdraw_a_pending_invitation(client, alice, dave, workspace):
    c = login(client, alice)
    _invite(c, "dave")
    invitation = _invitation_for(workspace, "dave")
    assert f"invitation-{invitation.pk}".encode() in c.get("/members/").content
    c.post("/members/", {"op": "revoke", "invitation": str(invitation.pk)})
    invitation.refresh_from_db()
    assert invitation.status == InvitationStatus.REVOKED
    assert login(Client(), dave).post(f"/workspace/invitations/{invitation.pk}/accept/").status_code == 404
    assert not Membership.objects.filter(workspace=workspace, user=dave).exists()


def test_an_expired_invitation_is_neither_listed_nor_accepted(client, alice, dave, workspace):
    _invite(login(client, alice), "dave")
    invitation = _invitation_for(workspace, "dave")
    Invitation.objects.filter(pk=invitation.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    dave_client = login(Client(), dave)
    assert f"invitation-{invitation.pk}".encode() not in dave_client.get("/workspace/invitations/").content
    assert dave_client.post(f"/workspace/invitations/{invitation.pk}/accept/").status_code == 404
    assert not Membership.objects.filter(workspace=workspace, user=dave).exists()


def test_the_members_page_does_not_reveal_which_usernames_exist(client, alice, dave, workspace):
    c = login(client, alice)
    answers = {}
    for name in ("dave", "no-such-user-7f3a"):
        response = _invite(c, name)
        answers[name] = (
            response.status_code,
            response["Location"],
            [m.replace(name, "NAME") for m in _flash(c, response)],
        )
    assert answers["dave"] == answers["no-such-user-7f3a"]
    # changing the role of, or removing, someone who is not a member: one answer for both names
    for op in ("role", "remove"):
        replies = {}
        for name in ("dave", "no-such-user-7f3a"):
            response = c.post("/members/", {"op": op, "username": name, "role": "owner"})
            replies[name] = (response.status_code, [m.replace(name, "NAME") for m in _flash(c, response)])
        assert replies["dave"] == replies["no-such-user-7f3a"], op
    assert not Membership.objects.filter(workspace=workspace, user=dave).exists()  # "role" added nobody


def test_an_owner_cannot_add_a_member_by_changing_a_role(client, alice, dave, workspace):
    response = login(client, alice).post("/members/", {"op": "role", "username": "dave", "role": "owner"})
    assert response.status_code == 302
    assert not Membership.objects.filter(workspace=workspace, user=dave).exists()
    assert any("NOT_A_MEMBER" in m for m in _flash(client, response))


def test_roles_and_removal_still_work_for_members(client, alice, bob, workspace):
    c = login(client, alice)
    c.post("/members/", {"op": "role", "username": "bob", "role": "viewer"})
    assert Membership.objects.get(workspace=workspace, user=bob).role == "viewer"
    c.post("/members/", {"op": "remove", "username": "bob"})
    assert not Membership.objects.filter(workspace=workspace, user=bob).exists()
    c.post("/members/", {"op": "role", "username": "alice", "role": "viewer"})
    assert Membership.objects.get(workspace=workspace, user=alice).role == "owner"  # no self-demotion


@pytest.mark.parametrize(
    "data",
    [
        {"op": "invite", "invitee": "", "role": "viewer"},
        {"op": "invite", "invitee": "x\r\ny", "role": "viewer"},
        {"op": "invite", "invitee": "a" * 300, "role": "viewer"},
        {"op": "invite", "invitee": "dave", "role": "emperor"},
        {"op": "revoke", "invitation": "99999999999999999999"},
        {"op": "revoke", "invitation": "x"},
        {"op": "explode"},
    ],
)
def test_bad_input_is_a_clear_error_and_changes_nothing(client, alice, workspace, data):
    response = login(client, alice).post("/members/", data)
    shown = _flash(client, response)
    # a sentence, the code as a small tag (never "CODE: message")
    assert shown and all(
        re.fullmatch(r'[A-Z].*\. <code class="error-code">[A-Z_]+</code>', m) for m in shown
    ), shown
    assert not Invitation.objects.exists()


def test_invite_and_revoke_are_owner_actions_in_the_one_table(client, bob, vera, workspace, alice):
    for action in (Action.INVITE_MEMBER, Action.REVOKE_INVITATION):
        assert role_allows("owner", action)
        assert not role_allows("reviewer", action) and not role_allows("viewer", action)
    _invite(login(client, alice), "someone")
    invitation = _invitation_for(workspace, "someone")
    for user in (bob, vera):
        c = login(Client(), user)
        assert _invite(c, "mallory").status_code == 403
        assert c.post("/members/", {"op": "revoke", "invitation": str(invitation.pk)}).status_code == 403
    invitation.refresh_from_db()
    assert invitation.status == InvitationStatus.PENDING
    assert not Invitation.objects.filter(invitee="mallory").exists()


def test_a_fresh_account_cannot_touch_another_workspaces_invitations(client, alice, dave, mallory, workspace):
    _invite(login(client, alice), "dave")
    invitation = _invitation_for(workspace, "dave")
    attacker = login(Client(), mallory)
    # not hers: 404, exactly like an invitation that does not exist
    for verb in ("accept", "decline"):
        mine = attacker.post(f"/workspace/invitations/{invitation.pk}/{verb}/")
        missing = attacker.post(f"/workspace/invitations/{invitation.pk + 1000}/{verb}/")
        assert mine.status_code == missing.status_code == 404
    assert b"Acme" not in attacker.get("/workspace/invitations/").content
    # the members page of her own (personal) workspace cannot reach acme's invitation
    attacker.post("/members/", {"op": "revoke", "invitation": str(invitation.pk)})
    invitation.refresh_from_db()
    assert invitation.status == InvitationStatus.PENDING
    assert not Membership.objects.filter(workspace=workspace, user=mallory).exists()
    # she can invite dave into her own workspace, but dave is not added by it
    attacker.post("/members/", {"op": "invite", "invitee": "dave", "role": "owner"})
    assert Membership.objects.filter(user=dave).count() == 0


def test_anonymous_visitors_are_sent_to_sign_in(client, alice, workspace):
    _invite(login(Client(), alice), "dave")
    invitation = _invitation_for(workspace, "dave")
    assert client.get("/workspace/invitations/").status_code == 302
    assert client.post(f"/workspace/invitations/{invitation.pk}/accept/").status_code == 302
    invitation.refresh_from_db()
    assert invitation.status == InvitationStatus.PENDING


def test_accepting_lands_in_the_workspace_joined(client, alice, dave, workspace, django_user_model):
    """Someone who already works in a workspace of their own lands in the one they joined."""
    from runs.actions.workspaces import personal_workspace
    from runs.web.request import SESSION_KEY

    _invite(login(client, alice), "dave")
    invitation = _invitation_for(workspace, "dave")
    dave_client = login(Client(), dave)
    own = personal_workspace(dave)
    dave_client.post("/workspace/switch/", {"workspace": own.slug})
    assert dave_client.session[SESSION_KEY] == own.slug
    accepted = dave_client.post(f"/workspace/invitations/{invitation.pk}/accept/")
    assert accepted.status_code == 302 and accepted["Location"] == "/runs/"
    assert dave_client.session[SESSION_KEY] == workspace.slug
    page = dave_client.get("/runs/")
    assert page.wsgi_request._workbench_membership.workspace == workspace
    assert "you are working in it now" in " ".join(str(m) for m in page.context["messages"])
