"""The MCP endpoint mounted in the project's ASGI application at /api/mcp.

* Stateless Streamable HTTP (``stateless_http=True``, JSON responses): no session lives in a
  process, so any daphne/uvicorn process behind a proxy answers any request. Protocol
  2026-07-28 requests are single exchanges anyway; 2025-06-18 and 2025-11-25 clients still
  send ``initialize`` and get no session id. Sealed request state (the "input required"
  round trips) uses keys derived from ``SECRET_KEY``, so another process can open it.
* Authentication happens once per HTTP request, here: a bearer token is checked like the REST
  API's (``accounts.tokens``), or an OAuth access token a person granted to an MCP host
  (``accounts.oauth``: bound to one workspace and its scopes); its principal is put in the ASGI
  scope for the tools, and the rate limits of ``accounts.ratelimit`` are counted (per token and
  per workspace; anonymous callers per client address). An invalid token is a 401; over the
  limit a 429 with ``Retry-After``. Without a token, discovery and ``tools/list`` are public;
  a tool call or a resource read is a 401 whose ``WWW-Authenticate`` names the protected-resource
  metadata (RFC 9728), which is what starts an MCP host's OAuth sign-in.
* The SDK's session manager needs a running task group. Under uvicorn it is started by the
  ASGI lifespan; daphne has no lifespan, so it starts lazily on the first request and stops
  before the reactor shuts down (else daphne would hang on SIGTERM).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from asgiref.sync import sync_to_async
from django.conf import settings

from runs.web.wire import rewire, wire_json

if TYPE_CHECKING:  # the MCP SDK and Twisted are imported when used (optional, costly)
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette

logger = logging.getLogger("workbench.mcp")

MCP_PATH = "/api/mcp"
RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource"
_HOST = re.compile(r"[A-Za-z0-9.\-]{1,253}(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]{2,45}\](:[0-9]{1,5})?")


def _transport_security():
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = list(settings.ALLOWED_HOSTS)
    if "*" in hosts or not hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    allowed_hosts, allowed_origins = [], []
    for host in hosts:
        host = host.lstrip(".")  # Django's ".example.com" (subdomains) is matched exactly here
        allowed_hosts += [host, f"{host}:*"]
        allowed_origins += [f"http://{host}", f"https://{host}", f"http://{host}:*", f"https://{host}:*"]
    allowed_origins += list(getattr(settings, "CSRF_TRUSTED_ORIGINS", []))
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins
    )


def _json_error(status: int, code: int, message: str, data: dict | None = None) -> bytes:
    error = {"code": code, "message": message}
    if data:
        error["data"] = data
    return wire_json({"jsonrpc": "2.0", "id": None, "error": error})


async def _send_json(send, status: int, body: bytes, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


class WireSend:
    """The ASGI ``send`` of one MCP exchange, with each JSON body spelt as the rest of the server
    writes JSON (:func:`runs.web.wire.rewire`: numbers as JavaScript prints them, members in order).

    The SDK writes its answers with pydantic or ``json`` (``1e-06``, ``-0.0``, ``1000.0``);
    a JSON body is held until its last chunk, written again and sent with its new length.
    Other bodies (event streams, errors in text) pass as they come.
    """

    def __init__(self, send) -> None:
        self._send = send
        self._start: dict | None = None
        self._chunks: list[bytes] = []

    async def __call__(self, message) -> None:
        kind = message["type"]
        if kind == "http.response.start" and _is_json(message.get("headers") or ()):
            self._start = message
            return
        if kind != "http.response.body" or self._start is None:
            await self._send(message)
            return
        self._chunks.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        body = rewire(b"".join(self._chunks))
        start, self._start, self._chunks = self._start, None, []
        headers = [(k, v) for k, v in start.get("headers") or () if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await self._send({**start, "headers": headers})
        await self._send({"type": "http.response.body", "body": body})


def _is_json(headers) -> bool:
    for name, value in headers:
        if name.lower() == b"content-type":
            return value.split(b";", 1)[0].strip().lower() == b"application/json"
    return False


def _bearer(scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            text = value.decode("latin-1").strip()
            scheme, _, token = text.partition(" ")
            return token.strip() if scheme.lower() == "bearer" else ""
    return None


def _authenticate(raw: str, resource: str):
    """The principal of a workspace API token (``wbt_...``) or of an OAuth access token issued for
    ``resource`` (accounts.oauth); None for anything else."""
    from django.db import close_old_connections

    # Deferred: workbench/asgi.py imports this module before Django's apps are ready (models).
    from accounts.oauth import principal_for_access_token
    from accounts.principals import principal_for_token
    from accounts.tokens import PREFIX, authenticate_token

    close_old_connections()
    if raw.startswith(PREFIX + "_"):
        token = authenticate_token(raw)
        return principal_for_token(token) if token is not None else None
    return principal_for_access_token(raw, resource)


def _origin(scope) -> str:
    """This server as the client addressed it (or WORKBENCH_SITE_URL): scheme://host[:port]."""
    site = (getattr(settings, "WORKBENCH_SITE_URL", "") or "").rstrip("/")
    if site:
        return site
    host = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"host"), "")
    if not _HOST.fullmatch(host):  # never reflect a header that could break the challenge's quoting
        server = scope.get("server") or ("localhost", None)
        host = f"{server[0]}:{server[1]}" if server[1] else str(server[0])
    scheme = "https" if scope.get("scheme") in ("https", "wss") else "http"
    return f"{scheme}://{host}"


def _challenge(scope, error: str | None = None) -> bytes:
    """RFC 9728 / RFC 6750: where a client finds how to get a token for this resource."""
    value = f'Bearer resource_metadata="{_origin(scope)}{RESOURCE_METADATA_PATH}"'
    if error:
        value += f', error="{error}"'
    return value.encode("latin-1")


# JSON-RPC methods that act on a workspace: without credentials they are answered 401 (with the
# challenge an OAuth client follows), not a tool error. Discovery, initialize and tools/list stay
# public; resources/list answers an empty list.
NEEDS_CREDENTIALS = frozenset({"tools/call", "resources/read"})


async def _read_body(receive, limit: int) -> tuple[bytes, list[dict], bool]:
    """The request body (at most ``limit`` bytes), the messages read, and whether it fit."""
    messages, size = [], 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return b"", messages, True
        size += len(message.get("body", b""))
        if size > limit:
            return b"", messages, False
        if not message.get("more_body", False):
            break
    return b"".join(m.get("body", b"") for m in messages), messages, True


def _needs_credentials(body: bytes) -> bool:
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return False  # the SDK answers the parse error
    calls = parsed if isinstance(parsed, list) else [parsed]
    return any(isinstance(call, dict) and call.get("method") in NEEDS_CREDENTIALS for call in calls)


def _replay(messages: list[dict], receive):
    pending = list(messages)

    async def replayed():
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


def _admit(principal, client: str):
    # Deferred: imported before Django's apps are ready (see _authenticate).
    from accounts.ratelimit import check_request, hit

    if principal is not None:
        check_request(
            workspace_id=principal.workspace.pk,
            credential=principal.credential,
            credential_limit=principal.rate_limit,
        )
        return None
    decision = hit(f"mcp-anon:{client}", limit=int(settings.WORKBENCH_RATE_LIMIT_PER_MINUTE))
    return decision


class McpEndpoint:
    """One per process: the SDK app, its session manager's lifetime, and the auth/rate-limit gate."""

    def __init__(self) -> None:
        self._app: Starlette | None = None
        self._manager: StreamableHTTPSessionManager | None = None
        self._task: asyncio.Task | None = None
        self._stop: asyncio.Event | None = None
        self._started: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        self._manager_ran = False  # the built manager's run() was entered (it cannot be again)
        self._reactor_hooked = False

    def _build(self) -> None:
        # Deferred: the MCP SDK is an optional extra and costly to import; built on first request.
        from runs.mcp.server import get_server

        server = get_server()
        self._app = server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            stateless_http=True,
            json_response=True,
            max_request_body_size=int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE),
            transport_security=_transport_security(),
        )
        self._manager = server.session_manager

    # -- lifetime ---------------------------------------------------------------------------

    def _running_here(self) -> bool:
        """The manager's task is alive on this event loop. A task of a loop that was closed while it
        waited (test runners give each test its own loop; a server may be restarted in-process) is
        never done, but its manager has reset itself: it counts as stopped."""
        task = self._task
        return task is not None and not task.done() and task.get_loop() is asyncio.get_running_loop()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:  # an asyncio.Lock belongs to one loop
            self._lock, self._lock_loop = asyncio.Lock(), loop
        async with self._lock:
            if self._running_here():
                return
            if self._app is None or self._manager_ran:  # a manager runs once: rebuild after a stop
                self._build()
            self._manager_ran = True
            self._stop = asyncio.Event()
            self._started = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._serve(), name="mcp-session-manager")
            self._hook_reactor()
        await self._started.wait()

    async def _serve(self) -> None:
        assert self._manager is not None and self._stop is not None and self._started is not None
        try:
            async with self._manager.run():
                self._started.set()
                await self._stop.wait()
        finally:
            self._started.set()

    async def stop(self) -> None:
        task = self._task
        if task is None:
            return
        if self._stop is not None:
            self._stop.set()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(task, timeout=5)
        self._task = None

    def _hook_reactor(self) -> None:
        """Under daphne (Twisted's asyncio reactor) stop the manager before the reactor shuts down."""
        if self._reactor_hooked or "twisted.internet.reactor" not in sys.modules:
            return
        from twisted.internet import defer, reactor

        def before_shutdown():
            return defer.Deferred.fromFuture(asyncio.ensure_future(self.stop()))

        # Twisted declares zope interface methods without `self` (read right by mypy-zope only)
        reactor.addSystemEventTrigger("before", "shutdown", before_shutdown)  # type: ignore[arg-type]
        self._reactor_hooked = True

    # -- requests ---------------------------------------------------------------------------

    async def __call__(self, scope, receive, send) -> None:
        if not self._running_here():
            await self.start()
        raw = _bearer(scope)
        principal = None
        if raw is not None:
            resource = _origin(scope) + MCP_PATH
            authenticate = sync_to_async(_authenticate, thread_sensitive=True)
            principal = await authenticate(raw, resource) if raw else None
            if principal is None:
                await _send_json(
                    send,
                    401,
                    _json_error(401, -32001, "UNAUTHENTICATED: invalid, expired or revoked token"),
                    [(b"www-authenticate", _challenge(scope, "invalid_token"))],
                )
                return
        # Deferred: imported before Django's apps are ready (see _authenticate).
        from accounts.ratelimit import RateLimited

        client = (scope.get("client") or ("?", 0))[0]
        try:
            anon = await sync_to_async(_admit, thread_sensitive=True)(principal, client)
        except RateLimited as exc:
            await self._too_many(send, exc.decision)
            return
        if anon is not None and not anon.allowed:
            await self._too_many(send, anon)
            return
        if principal is None and scope.get("method") == "POST":
            limit = int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
            body, messages, fits = await _read_body(receive, limit)
            if not fits:
                await _send_json(
                    send, 413, _json_error(413, -32600, f"PAYLOAD_TOO_LARGE: request body over {limit} bytes")
                )
                return
            if _needs_credentials(body):
                message = (
                    "UNAUTHENTICATED: this needs a workspace token (Authorization: Bearer wbt_...) "
                    "or an OAuth access token (see the resource_metadata of WWW-Authenticate)"
                )
                await _send_json(
                    send, 401, _json_error(401, -32001, message), [(b"www-authenticate", _challenge(scope))]
                )
                return
            receive = _replay(messages, receive)
        scope = dict(scope)
        scope["workbench.principal"] = principal
        assert self._app is not None
        await self._app(scope, receive, WireSend(send))

    @staticmethod
    async def _too_many(send, decision) -> None:
        await _send_json(
            send,
            429,
            _json_error(429, -32002, f"RATE_LIMITED: {decision.limit} requests per window exceeded"),
            [(b"retry-after", str(decision.retry_after).encode())],
        )


endpoint = McpEndpoint()
endpoint._build()  # at import (server start), not on the first request


def is_mcp_path(path: str) -> bool:
    return path == MCP_PATH or path == MCP_PATH + "/"
