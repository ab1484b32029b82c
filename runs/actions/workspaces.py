"""Workspaces (tenants), their members, and invitations that the invitee accepts.

Nobody becomes a member without consent: an owner *invites* a username or an e-mail address
(:func:`do_invite_member`); the person it names sees the invitation after signing in and accepts
or declines it (:func:`do_accept_invitation`, :func:`do_decline_invitation`); the owner may
revoke it while it waits (:func:`do_revoke_invitation`); it expires after
``WORKBENCH_INVITATION_DAYS``. Inviting never looks the name up among the accounts, so an owner
learns nothing about which usernames exist: the answer is the same for every name. Changing a
role or removing someone applies to members of the workspace only.
"""

from __future__ import annotations

import re
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.text import slugify

from runs.models import Invitation, InvitationStatus, Membership, Role, Workspace

MAX_INVITEE_LENGTH = 254
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class MembershipError(Exception):
    """A member or invitation change refused: ``code`` for machines, ``message`` for people."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def invitation_days() -> int:
    return int(getattr(settings, "WORKBENCH_INVITATION_DAYS", 7))


def _role(role: str) -> str:
    if role not in Role.values:
        raise MembershipError("INVALID_ROLE", f"choose a role: {', '.join(Role.values)}")
    return role


def _invitee(text: object) -> str:
    invitee = text.strip() if isinstance(text, str) else ""
    if not invitee:
        raise MembershipError("INVALID_INPUT", "enter a username or an e-mail address")
    if len(invitee) > MAX_INVITEE_LENGTH or _CONTROL.search(invitee):
        raise MembershipError(
            "INVALID_INPUT",
            f"a username or e-mail address has at most {MAX_INVITEE_LENGTH} printable characters",
        )
    return invitee.lower() if "@" in invitee else invitee


def _member_named(workspace: Workspace, username: str) -> Membership | None:
    return (
        Membership.objects.filter(workspace=workspace, user__username=username).select_related("user").first()
    )


def do_invite_member(*, workspace: Workspace, invited_by, invitee: str, role: str) -> Invitation | None:
    """Invite ``invitee`` (a username or an e-mail address) to ``role``; None when it names a
    member already. A pending invitation for the same name is renewed (new role, new expiry)."""
    invitee, role = _invitee(invitee), _role(role)
    with transaction.atomic():
        named = Q(user__username__iexact=invitee) | Q(user__email__iexact=invitee)
        if Membership.objects.filter(workspace=workspace).filter(named).exists():
            return None
        expires = timezone.now() + timedelta(days=invitation_days())
        invitation = (
            Invitation.objects.select_for_update()
            .filter(workspace=workspace, invitee__iexact=invitee, status=InvitationStatus.PENDING)
            .first()
        )
        if invitation is None:
            return Invitation.objects.create(
                workspace=workspace, invitee=invitee, role=role, invited_by=invited_by, expires_at=expires
            )
        invitation.role, invitation.invited_by, invitation.expires_at = role, invited_by, expires
        invitation.save(update_fields=["role", "invited_by", "expires_at"])
        return invitation


def do_revoke_invitation(*, workspace: Workspace, invitation_pk: object) -> Invitation:
    """Withdraw a pending invitation of ``workspace`` (another workspace's is "no such invitation")."""
    pk = invitation_pk if isinstance(invitation_pk, int) else _pk(invitation_pk)
    with transaction.atomic():
        invitation = (
            Invitation.objects.select_for_update()
            .filter(workspace=workspace, pk=pk, status=InvitationStatus.PENDING)
            .first()
            if pk
            else None
        )
        if invitation is None:
            raise MembershipError("NOT_FOUND", "no such pending invitation")
        invitation.status, invitation.responded_at = InvitationStatus.REVOKED, timezone.now()
        invitation.save(update_fields=["status", "responded_at"])
    return invitation


def _pk(value: object) -> int | None:
    text = value.strip() if isinstance(value, str) else ""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None


def invitations_for(user) -> list[Invitation]:
    """The open invitations addressed to ``user``, newest first."""
    if not getattr(user, "is_authenticated", False):
        return []
    return list(Invitation.objects.open().addressed_to(user).select_related("workspace", "invited_by"))


def _open_invitation_for(user, invitation_pk: object) -> Invitation:
    pk = invitation_pk if isinstance(invitation_pk, int) else _pk(invitation_pk)
    invitation = (
        Invitation.objects.select_for_update().open().addressed_to(user).filter(pk=pk).first() if pk else None
    )
    if invitation is None:  # someone else's, answered, revoked, expired or made up: all the same
        raise MembershipError("NOT_FOUND", "no such invitation (it may have expired or been withdrawn)")
    return invitation


def do_accept_invitation(*, user, invitation_pk: object) -> Membership:
    """The invitee's consent: the membership is made (an existing one keeps the higher role)."""
    with transaction.atomic():
        invitation = _open_invitation_for(user, invitation_pk)
        membership = Membership.objects.filter(workspace=invitation.workspace, user=user).first()
        if membership is None:
            membership = add_member(invitation.workspace, user, invitation.role)
        elif not membership.has_role(invitation.role):
            membership = add_member(invitation.workspace, user, invitation.role)
        invitation.status, invitation.responded_at = InvitationStatus.ACCEPTED, timezone.now()
        invitation.save(update_fields=["status", "responded_at"])
    return membership


def do_decline_invitation(*, user, invitation_pk: object) -> Invitation:
    with transaction.atomic():
        invitation = _open_invitation_for(user, invitation_pk)
        invitation.status, invitation.responded_at = InvitationStatus.DECLINED, timezone.now()
        invitation.save(update_fields=["status", "responded_at"])
    return invitation


def do_change_member_role(*, workspace: Workspace, acting_user, username: str, role: str) -> Membership:
    """A member's new role. Only members are changed: a name outside the workspace is "no member"."""
    role = _role(role)
    membership = _member_named(workspace, username)
    if membership is None:
        raise MembershipError("NOT_A_MEMBER", f"no member named {username!r} in this workspace")
    if membership.user_id == acting_user.pk and role != Role.OWNER:
        raise MembershipError("SELF_DEMOTION", "you cannot demote yourself")
    return add_member(workspace, membership.user, role)


def do_remove_member(*, workspace: Workspace, acting_user, username: str) -> None:
    membership = _member_named(workspace, username)
    if membership is None:
        raise MembershipError("NOT_A_MEMBER", f"no member named {username!r} in this workspace")
    if membership.user_id == acting_user.pk:
        raise MembershipError("SELF_REMOVAL", "you cannot remove yourself")
    Membership.objects.filter(pk=membership.pk).delete()


# The public demo's workspace: a read-only snapshot (runs.demo.public). No member, no token, and
# the actions refuse to change its runs (READ_ONLY), whoever asks.
PUBLIC_DEMO_WORKSPACE = "public-demo"
READ_ONLY = "READ_ONLY"


def is_read_only(workspace: Workspace) -> bool:
    return workspace.slug == PUBLIC_DEMO_WORKSPACE


def get_or_create_workspace(slug: str, *, name: str | None = None) -> Workspace:
    slug = slugify(slug)
    if not slug:
        raise ValueError("a workspace slug needs at least one letter or digit")
    workspace, _ = Workspace.objects.get_or_create(slug=slug, defaults={"name": name or slug})
    return workspace


_WORKSPACE_SLUG = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def do_create_workspace(*, slug: str, name: str | None = None) -> Workspace:
    """A new workspace (``workbench createworkspace``). Refused, and nothing created, for a slug
    that is not one (``INVALID_SLUG``: lower-case letters, digits, ``-`` and ``_``, 1-64, as URLs
    spell it) or that exists already (``WORKSPACE_EXISTS``)."""
    if not isinstance(slug, str) or not _WORKSPACE_SLUG.fullmatch(slug):
        raise MembershipError(
            "INVALID_SLUG",
            f"{slug!r} is no workspace slug: 1-64 lower-case letters, digits, '-' or '_', "
            "starting with a letter or digit",
        )
    display = (name or slug).strip()
    if not display or len(display) > 200 or _CONTROL.search(display):
        raise MembershipError("INVALID_INPUT", "a workspace name has 1-200 printable characters")
    with transaction.atomic():
        if Workspace.objects.filter(slug=slug).exists():
            raise MembershipError("WORKSPACE_EXISTS", f"a workspace {slug!r} exists already")
        return Workspace.objects.create(slug=slug, name=display)


def add_member(workspace: Workspace, user, role: str = Role.VIEWER) -> Membership:
    membership, created = Membership.objects.get_or_create(
        workspace=workspace, user=user, defaults={"role": role}
    )
    if not created and membership.role != role:
        membership.role = role
        membership.save(update_fields=["role"])
    return membership


def personal_workspace(user) -> Workspace:
    """A user with no workspace gets a personal one, which they own."""
    membership = (
        Membership.objects.filter(user=user).select_related("workspace").order_by("created_at").first()
    )
    if membership is not None:
        return membership.workspace
    with transaction.atomic():
        base = slugify(f"{user.get_username()}-personal") or f"user-{user.pk}"
        slug = base
        n = 1
        while Workspace.objects.filter(slug=slug).exists():
            n += 1
            slug = f"{base}-{n}"
        workspace = Workspace.objects.create(
            slug=slug, name=f"{user.get_username()} (personal)", is_personal=True
        )
        add_member(workspace, user, Role.OWNER)
    return workspace
