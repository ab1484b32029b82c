"""People: a new account that owns a workspace (``workbench createuser``).

Sign-in accounts are Django's users; membership and roles are the workspace's
(:mod:`runs.actions.workspaces`). Creating an account and making it a member happen in one
transaction: a refused password or a taken name leaves nothing behind.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model, password_validation
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import Field

from runs.actions.workspaces import add_member
from runs.models import Role, Workspace


class AccountError(Exception):
    """An account refused: ``code`` for machines, ``message`` for people."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _checked_username(username: str) -> str:
    model = get_user_model()
    field = model._meta.get_field(model.USERNAME_FIELD)
    assert isinstance(field, Field)  # the username is a concrete field, never a relation
    try:
        return str(field.clean(username, None))
    except ValidationError as error:
        raise AccountError("INVALID_USERNAME", " ".join(error.messages)) from None


def do_create_user(
    *, username: str, workspace: Workspace, role: str = Role.OWNER, email: str = "", password: str | None
) -> object:
    """A new user with ``role`` (owner by default) in ``workspace``. ``password`` None: an
    account that cannot sign in with a password until one is set. Codes: INVALID_USERNAME,
    USERNAME_TAKEN, INVALID_EMAIL, WEAK_PASSWORD, INVALID_ROLE."""
    model = get_user_model()
    username = _checked_username(username)
    if role not in Role.values:
        raise AccountError("INVALID_ROLE", f"choose a role: {', '.join(Role.values)}")
    if email:
        try:
            validate_email(email)
        except ValidationError:
            raise AccountError("INVALID_EMAIL", f"{email!r} is no e-mail address") from None
    if password is not None:
        try:
            password_validation.validate_password(password, model(username=username, email=email))
        except ValidationError as error:
            raise AccountError("WEAK_PASSWORD", " ".join(error.messages)) from None
    with transaction.atomic():
        if model._default_manager.filter(**{model.USERNAME_FIELD: username}).exists():
            raise AccountError("USERNAME_TAKEN", f"a user {username!r} exists already")
        user = model._default_manager.create_user(username=username, email=email, password=password)
        add_member(workspace, user, role)
    return user
