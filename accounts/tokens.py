"""Issuing, checking and revoking API tokens.

A token reads ``wbt_<key_id>_<secret>``. ``key_id`` finds the row, the SHA-256 of the secret
is compared in constant time. The secret has 256 bits of entropy, so a fast hash is enough
(no password stretching needed) and the database never holds anything that authenticates.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from accounts.models import ALL_SCOPES, ApiToken
from runs.models import Workspace
from runs.selectors.keyset import newest_first

PREFIX = "wbt"
_TOKEN_RE = re.compile(r"^wbt_([A-Za-z0-9]{8,32})_([A-Za-z0-9_-]{20,128})$")
# last_used_at is written at most this often per token (no write per request).
LAST_USED_RESOLUTION = timedelta(minutes=1)


class TokenError(ValueError):
    """A token request that cannot be honoured (bad scopes, name or expiry)."""


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    secret: str  # the full token text; shown once, never stored

    def __str__(self) -> str:
        return self.secret


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def normalize_scopes(scopes: Iterable[str]) -> list[str]:
    wanted = {s.strip().lower() for s in scopes if s and s.strip()}
    unknown = wanted - set(ALL_SCOPES)
    if unknown:
        raise TokenError(
            f"unknown scope(s): {', '.join(sorted(unknown))}; choose from {', '.join(ALL_SCOPES)}"
        )
    if not wanted:
        raise TokenError("a token needs at least one scope")
    return [s for s in ALL_SCOPES if s in wanted]


def create_token(
    *,
    workspace: Workspace,
    name: str,
    scopes: Iterable[str],
    created_by=None,
    expires_at: datetime | None = None,
    expires_in: timedelta | None = None,
    rate_limit: int | None = None,
) -> IssuedToken:
    name = (name or "").strip()
    if not name:
        raise TokenError("a token needs a name")
    if expires_in is not None:
        if expires_in <= timedelta(0):
            raise TokenError("expiry must be in the future")
        expires_at = timezone.now() + expires_in
    if expires_at is not None and expires_at <= timezone.now():
        raise TokenError("expiry must be in the future")
    if rate_limit is not None and rate_limit < 1:
        raise TokenError("rate limit must be at least 1 request per window")
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        workspace=workspace,
        key_id=key_id,
        secret_hash=hash_secret(secret),
        name=name[:200],
        scopes=normalize_scopes(scopes),
        created_by=created_by,
        expires_at=expires_at,
        rate_limit=rate_limit,
    )
    return IssuedToken(token=token, secret=f"{PREFIX}_{key_id}_{secret}")


def authenticate_token(raw: str | None) -> ApiToken | None:
    """The active token this text denotes, or None (malformed, unknown, wrong secret, revoked, expired)."""
    if not raw:
        return None
    match = _TOKEN_RE.match(raw.strip())
    if match is None:
        return None
    key_id, secret = match.groups()
    token = ApiToken.objects.select_related("workspace").filter(key_id=key_id).first()
    if token is None:
        # Same work as for a known id, so timing does not reveal which ids exist.
        hmac.compare_digest(hash_secret(secret), "0" * 64)
        return None
    if not hmac.compare_digest(hash_secret(secret), token.secret_hash):
        return None
    if not token.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def list_tokens(workspace: Workspace, *, include_inactive: bool = True) -> list[ApiToken]:
    qs = ApiToken.objects.for_workspace(workspace)
    if not include_inactive:
        qs = qs.active()
    return list(qs)


TOKENS_PER_PAGE = 50


def tokens_page(
    workspace: Workspace, *, cursor: str = "", limit: int | None = None
) -> tuple[list[ApiToken], str]:
    """One keyset page of the workspace's tokens, newest first (index token_ws_created), and the
    next page's cursor (""). Raises runs.selectors.keyset.BadCursor for a cursor that does not parse."""
    qs = ApiToken.objects.for_workspace(workspace).select_related("created_by")
    return newest_first(qs, cursor=cursor, limit=limit or TOKENS_PER_PAGE)


def revoke_token(*, workspace: Workspace, key_id: str) -> ApiToken:
    """Revoke a token of this workspace (idempotent). Raises ApiToken.DoesNotExist for others'."""
    with transaction.atomic():
        token = ApiToken.objects.for_workspace(workspace).select_for_update().get(key_id=key_id)
        if token.revoked_at is None:
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
    return token


_DURATION_RE = re.compile(r"^(\d+)\s*([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str) -> timedelta:
    """``30d``, ``12h``, ``2w``, ``90m`` -> timedelta."""
    match = _DURATION_RE.match(text.strip().lower())
    if match is None:
        raise TokenError(f"cannot read duration {text!r}: use e.g. 90m, 12h, 30d, 2w")
    amount, unit = match.groups()
    return timedelta(**{_UNITS[unit]: int(amount)})
