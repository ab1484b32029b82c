"""Workspaces (tenants) and who may do what in them."""

from __future__ import annotations

from django.db import transaction
from django.utils.text import slugify

from runs.models import Membership, Role, Workspace

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
