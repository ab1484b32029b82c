"""Read replicas: pages and lists read a streaming replica, a request that just wrote reads the primary.

Configured by `DATABASE_REPLICA_URL` (a `postgres://` URL of a hot standby of `DATABASE_URL`): the
settings then add a `replica` alias (TEST MIRROR of `default`, so tests see one database) and this
router. Without it nothing changes: every query goes to `default`.

What reads the replica: the queries of a page request (GET/HEAD, a browser session, not `/api/`,
`/mcp`, `/live/` or `/ws/`) on the project's own tables (`REPLICA_APPS`), outside any transaction,
before the request has written anything. Everything else reads the primary:
- writes, and every read of a request after its first write (`db_for_write` marks the request);
- reads inside `transaction.atomic` (an action's reads decide what it writes);
- sessions, users, permissions (a login that just happened must be seen at once);
- a browser that wrote in the last `REPLICA_PIN_SECONDS` (default 5): a request that writes
  (POST/PUT/PATCH/DELETE) sets the `wb_primary` cookie for that long, so the page shown after a
  form post (its redirect, the htmx refresh) reads what was just committed, whatever the lag;
- the API, MCP and the live path (SDK clients read what they appended; websockets render from
  the primary, which they were notified about).

Replica lag beyond the pin (a long-lagging standby) shows as a page a little behind, never as a
wrong write: writes and their checks always run on the primary.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable

from django.conf import settings
from django.db import connections
from django.http import HttpRequest, HttpResponse

REPLICA = "replica"
PRIMARY = "default"
PIN_COOKIE = "wb_primary"
REPLICA_APPS = frozenset({"runs", "evals", "review", "playground"})
PRIMARY_PREFIXES = ("/api/", "/mcp", "/live/", "/ws/", "/accounts/", "/admin/", "/o/")
SAFE_METHODS = frozenset({"GET", "HEAD"})

# Per request (and per thread/task: a contextvar): may this request's reads go to the replica?
_replica_ok: contextvars.ContextVar[bool] = contextvars.ContextVar("replica_ok", default=False)


def replica_configured() -> bool:
    return REPLICA in settings.DATABASES


def pin_seconds() -> float:
    return float(getattr(settings, "REPLICA_PIN_SECONDS", 5))


def request_may_read_replica(request: HttpRequest) -> bool:
    """The routing decision for a request, before it runs."""
    if not replica_configured() or request.method not in SAFE_METHODS:
        return False
    if request.path.startswith(PRIMARY_PREFIXES) or "HTTP_AUTHORIZATION" in request.META:
        return False
    pinned_until = request.COOKIES.get(PIN_COOKIE, "")
    try:
        if float(pinned_until) > time.time():
            return False  # this browser wrote a moment ago
    except ValueError:
        pass
    return True


class ReplicaRouter:
    """`DATABASE_ROUTERS` entry: replica for the reads a page request allows, primary otherwise."""

    def db_for_read(self, model, **hints) -> str | None:
        if not _replica_ok.get() or model._meta.app_label not in REPLICA_APPS:
            return None
        if connections[PRIMARY].in_atomic_block:
            return None  # reads that decide a write see the primary
        return REPLICA

    def db_for_write(self, model, **hints) -> str:
        _replica_ok.set(False)  # this request wrote: it reads its own writes from now on
        return PRIMARY

    def allow_relation(self, obj1, obj2, **hints) -> bool | None:
        if {obj1._state.db, obj2._state.db} <= {PRIMARY, REPLICA}:
            return True
        return None

    def allow_migrate(self, db: str, app_label: str, model_name: str | None = None, **hints) -> bool | None:
        if db == REPLICA:
            return False  # the replica follows the primary's schema by replication
        return None


class ReplicaReadMiddleware:
    """Decides per request whether its reads may go to the replica, and pins a browser that
    wrote to the primary for `REPLICA_PIN_SECONDS`."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = _replica_ok.set(request_may_read_replica(request))
        try:
            response = self.get_response(request)
        finally:
            _replica_ok.reset(token)
        if replica_configured() and request.method not in SAFE_METHODS and response.status_code < 500:
            seconds = pin_seconds()
            response.set_cookie(
                PIN_COOKIE,
                f"{time.time() + seconds:.3f}",
                max_age=max(1, int(seconds + 0.999)),
                secure=settings.SESSION_COOKIE_SECURE,
                httponly=True,
                samesite="Lax",
            )
        return response


def reading_replica() -> bool:
    """Whether reads of this request/task may go to the replica now (diagnostics and tests)."""
    return _replica_ok.get()


class use_replica:
    """Context manager: reads in the block may go to the replica (management commands, tests)."""

    def __init__(self, allowed: bool = True) -> None:
        self.allowed = allowed
        self.token: contextvars.Token | None = None

    def __enter__(self) -> None:
        self.token = _replica_ok.set(self.allowed and replica_configured())

    def __exit__(self, *exc: object) -> None:
        if self.token is not None:
            _replica_ok.reset(self.token)
