"""Workspace members and their roles (owners only)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from runs.models import Membership, Role
from runs.permissions import Action
from runs.web import (
    require_action,
)


@login_required
def members(request: HttpRequest) -> HttpResponse:
    from runs.workspaces import add_member

    membership = require_action(request, Action.MANAGE_MEMBERS)
    workspace = membership.workspace
    if request.method == "POST":
        op = request.POST.get("op", "")
        username = request.POST.get("username", "").strip()
        role = request.POST.get("role", "")
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            messages.error(request, f"No user named {username!r}.")
        elif op == "remove":
            if user == request.user:
                messages.error(request, "You cannot remove yourself.")
            else:
                Membership.objects.filter(workspace=workspace, user=user).delete()
                messages.success(request, f"Removed {username}.")
        elif role in Role.values:
            if user == request.user and role != Role.OWNER:
                messages.error(request, "You cannot demote yourself.")
            else:
                add_member(workspace, user, role)
                messages.success(request, f"{username} is now {role}.")
        else:
            messages.error(request, "Choose a role.")
        return redirect("runs:members")
    rows = list(
        Membership.objects.filter(workspace=workspace).select_related("user").order_by("user__username")
    )
    return render(
        request,
        "runs/members.html",
        {"rows": rows, "roles": Role.choices, "workspace": workspace, "nav_active": "members"},
    )
