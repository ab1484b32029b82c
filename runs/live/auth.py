"""Websocket authentication that costs one thread hop per live run socket, not three.

Channels' `AuthMiddleware` resolves `scope["user"]` in a `database_sync_to_async` hop of its own
before the consumer runs (the session row, then the user row); the run page's consumer then hops
again to authorize the run and once more to read its head. At a thousand sockets connecting
those hops queue on the process's one sync thread. `DeferredAuthMiddleware` leaves the user
unresolved for the paths in `DEFERRED_PREFIXES`: their consumer resolves it with `resolve_user`
inside its own (single) hop. Every other path is resolved exactly as `AuthMiddleware` does.
"""

from __future__ import annotations

from channels.auth import AuthMiddleware, get_user
from channels.sessions import CookieMiddleware, SessionMiddleware
from django.utils.functional import empty

DEFERRED_PREFIXES = ("/ws/runs/",)


def resolve_user(scope: dict):
    """Sync: `scope["user"]` as AuthMiddleware would set it (session, hash check, backend), resolved
    in the calling thread; a no-op when it is resolved already."""
    lazy = scope.get("user")
    wrapped = getattr(lazy, "_wrapped", None)
    if lazy is None or not _is_unresolved(wrapped):
        return lazy
    lazy._wrapped = get_user.func(scope)  # the sync body of channels.auth.get_user
    return lazy


def _is_unresolved(wrapped) -> bool:
    return wrapped is empty


class DeferredAuthMiddleware(AuthMiddleware):
    async def resolve_scope(self, scope):
        if str(scope.get("path", "")).startswith(DEFERRED_PREFIXES):
            return  # the consumer calls resolve_user in its own database hop
        await super().resolve_scope(scope)


def DeferredAuthMiddlewareStack(inner):
    return CookieMiddleware(SessionMiddleware(DeferredAuthMiddleware(inner)))
