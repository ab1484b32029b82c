"""The invitee's side of workspace invitations: a list after sign-in, accept or decline.

Signing in counts the open invitations addressed to the user into the session
(``pending_invitations``), so every page can show a banner without a query of its own; the list
page counts them afresh. An invitation that is not the user's, or no longer open, answers 404 the
same as one that never existed.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from runs.actions.workspaces import (
    MembershipError,
    do_accept_invitation,
    do_decline_invitation,
    invitations_for,
)
from runs.web.request import switch_workspace

SESSION_KEY = "pending_invitations"


def remember_count(request: HttpRequest, count: int) -> None:
    request.session[SESSION_KEY] = count


def on_login(sender, request, user, **kwargs) -> None:
    """``user_logged_in``: how many invitations wait for this user (the banner's number)."""
    if request is not None and hasattr(request, "session"):
        remember_count(request, len(invitations_for(user)))


@login_required
@require_GET
def invitations(request: HttpRequest) -> HttpResponse:
    pending = invitations_for(request.user)
    remember_count(request, len(pending))
    return render(request, "accounts/invitations.html", {"invitations": pending, "nav_active": "invitations"})


def _answer(request: HttpRequest, invitation_id: int, accept: bool) -> HttpResponse:
    try:
        if accept:
            membership = do_accept_invitation(user=request.user, invitation_pk=invitation_id)
        else:
            invitation = do_decline_invitation(user=request.user, invitation_pk=invitation_id)
    except MembershipError:
        raise Http404("no such invitation") from None
    remember_count(request, len(invitations_for(request.user)))
    if accept:
        # the person lands in the workspace they joined (the session's workspace switches to it)
        switch_workspace(request, membership.workspace.slug)
        messages.success(
            request,
            f"You joined {membership.workspace.name} as {membership.role}; you are working in it now.",
        )
        return redirect("runs:list")
    messages.success(request, f"You declined the invitation to {invitation.workspace.name}.")
    return redirect("accounts:invitations")


@login_required
@require_POST
def accept(request: HttpRequest, invitation_id: int) -> HttpResponse:
    return _answer(request, invitation_id, accept=True)


@login_required
@require_POST
def decline(request: HttpRequest, invitation_id: int) -> HttpResponse:
    return _answer(request, invitation_id, accept=False)
