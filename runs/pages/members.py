"""Workspace members, their roles and the invitations waiting for an answer (owners only).

Nobody is added here: an owner invites a username or an e-mail address and the person accepts
(runs.actions.workspaces). The answer to an invitation is the same whether or not the name belongs to an
account, so this page tells nobody which usernames exist.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from runs.actions.permissions import Action
from runs.actions.workspaces import (
    MembershipError,
    do_change_member_role,
    do_invite_member,
    do_remove_member,
    do_revoke_invitation,
    invitation_days,
)
from runs.models import Invitation, Membership, Role
from runs.selectors.keyset import BadCursor, by_name
from runs.web.refusals import refusal
from runs.web.request import require_action

MEMBERS_PER_PAGE = 100  # a keyset page by username (after=<the previous page's last username>)


def _apply(request: HttpRequest, op: str) -> str:
    """Carry out one POSTed operation; returns the message for the page (raises MembershipError)."""
    post = request.POST
    if op == "invite":
        workspace = require_action(request, Action.INVITE_MEMBER).workspace
        invitee = post.get("invitee", "")
        invitation = do_invite_member(
            workspace=workspace, invited_by=request.user, invitee=invitee, role=post.get("role", "")
        )
        if invitation is None:
            return f"{invitee.strip()} is a member already."
        return (
            f"Invitation to “{invitation.invitee}” as {invitation.role} recorded. The person with that "
            f"username or e-mail address sees it after signing in; it expires in {invitation_days()} days."
        )
    if op == "revoke":
        workspace = require_action(request, Action.REVOKE_INVITATION).workspace
        invitation = do_revoke_invitation(workspace=workspace, invitation_pk=post.get("invitation"))
        return f"The invitation to “{invitation.invitee}” is withdrawn."
    workspace = require_action(request, Action.MANAGE_MEMBERS).workspace
    username = post.get("username", "").strip()
    if op == "remove":
        do_remove_member(workspace=workspace, acting_user=request.user, username=username)
        return f"Removed {username}."
    if op == "role":
        membership = do_change_member_role(
            workspace=workspace, acting_user=request.user, username=username, role=post.get("role", "")
        )
        return f"{username} is now {membership.role}."
    raise MembershipError("INVALID_INPUT", "unknown operation")


@login_required
@require_http_methods(["GET", "POST"])
def members(request: HttpRequest) -> HttpResponse:
    workspace = require_action(request, Action.MANAGE_MEMBERS).workspace
    if request.method == "POST":
        try:
            messages.success(request, _apply(request, request.POST.get("op", "")))
        except MembershipError as exc:
            messages.error(request, refusal(exc))
        return redirect("runs:members")
    after = request.GET.get("after", "")
    try:
        rows, next_after = by_name(
            Membership.objects.filter(workspace=workspace).select_related("user"),
            name="user__username",
            cursor=after,
            limit=MEMBERS_PER_PAGE,
        )
    except BadCursor:
        return HttpResponseBadRequest("bad cursor")
    invitations = list(Invitation.objects.filter(workspace=workspace).open().select_related("invited_by"))
    return render(
        request,
        "runs/members.html",
        {
            "rows": rows,
            "after": after,
            "next_after": next_after,
            "invitations": invitations,
            "roles": Role.choices,
            "workspace": workspace,
            "nav_active": "members",
        },
    )
