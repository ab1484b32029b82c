"""Who is calling, on behalf of which workspace, allowed to do what.

A request is made either by a person (Django session; their membership role gives their
scopes), by a machine (an API token of one workspace with explicit scopes) or by a program a
person authorized with OAuth (accounts.oauth: the scopes they granted within their role). All
become a :class:`Principal`, the only thing API handlers look at.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from accounts.models import ApiToken
from runs.actions.permissions import ROLE_SCOPES, Action, allows, needed_scopes
from runs.actions.workspaces import personal_workspace
from runs.models import Membership, Role, Workspace


class NotPermitted(Exception):
    """The caller is known but lacks the scope the operation needs (HTTP 403)."""

    def __init__(self, needed: tuple[str, ...], action: str | None = None) -> None:
        what = f"{action.replace('_', ' ')} needs" if action else "this operation needs"
        super().__init__(f"{what} the {' or '.join(needed)} scope")
        self.needed = needed
        self.action = action


@dataclass(frozen=True)
class Principal:
    workspace: Workspace
    actor: str  # "user:<username>" or "token:<key_id>": stored beside every event it writes
    scopes: frozenset[str] = field(default_factory=frozenset)
    user: object | None = None
    token: ApiToken | None = None
    role: str | None = None
    # The OAuth client acting for ``user`` with an access token (accounts.oauth), else None.
    client: str | None = None

    @property
    def credential(self) -> str:
        """The rate-limit bucket of this caller within its workspace."""
        if self.token is not None:
            return f"token:{self.token.key_id}"
        if self.client is not None:
            return f"oauth:{self.client}:{getattr(self.user, 'pk', '')}"
        return f"user:{getattr(self.user, 'pk', '')}"

    @property
    def rate_limit(self) -> int | None:
        return self.token.rate_limit if self.token is not None else None

    def has_scope(self, *scopes: str) -> bool:
        return any(s in self.scopes for s in scopes)

    def require(self, *scopes: str) -> None:
        """Raise NotPermitted unless the caller has one of ``scopes``."""
        if not self.has_scope(*scopes):
            raise NotPermitted(scopes)

    def may(self, action: Action | str) -> bool:
        """Whether the permission table lets this caller do ``action``."""
        return allows(self.scopes, action)

    def require_action(self, action: Action | str) -> None:
        """Raise NotPermitted unless the permission table lets this caller do ``action``."""
        if not self.may(action):
            raise NotPermitted(needed_scopes(action), str(action))


def principal_for_token(token: ApiToken) -> Principal:
    return Principal(
        workspace=token.workspace,
        actor=token.actor,
        scopes=frozenset(token.scopes),
        token=token,
    )


def principal_for_user(user, workspace_slug: str | None = None) -> Principal | None:
    """A signed-in person in a workspace they belong to (their personal one when they have none).

    With ``workspace_slug`` the person must be a member of that workspace, else None.
    """
    if user is None or not user.is_authenticated:
        return None
    if workspace_slug:
        membership = (
            Membership.objects.select_related("workspace")
            .filter(user=user)
            .in_workspace(workspace_slug)
            .first()
        )
        if membership is None:
            return None
    else:
        workspace = personal_workspace(user)
        membership = Membership.objects.select_related("workspace").get(user=user, workspace=workspace)
    return principal_for_membership(membership)


def principal_for_membership(membership: Membership) -> Principal:
    user = membership.user
    return Principal(
        workspace=membership.workspace,
        actor=f"user:{user.get_username()}",
        scopes=ROLE_SCOPES[Role(membership.role)],
        user=user,
        role=membership.role,
    )
