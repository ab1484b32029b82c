"""ASGI entry point: HTTP through Django, websockets through Channels, MCP at /api/mcp.

The MCP endpoint (runs/mcp/asgi.py) is the official SDK's Streamable HTTP app, served in the
same process. Its session manager is started by the ASGI lifespan when the server sends one
(uvicorn) and lazily on the first MCP request otherwise (daphne).
"""

import os
from typing import TYPE_CHECKING

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from runs.live.auth import DeferredAuthMiddlewareStack  # noqa: E402
from runs.live.shutdown import install_daphne_graceful_shutdown  # noqa: E402
from runs.web.request_limits import install_daphne_request_limits  # noqa: E402
from runs.web.uploads import BodyLimitASGI, install_daphne_body_limit  # noqa: E402
from workbench.routing import websocket_urlpatterns  # noqa: E402

if TYPE_CHECKING:
    from runs.mcp.asgi import McpEndpoint

mcp_endpoint: "McpEndpoint | None" = None  # None: the MCP extra is not installed (/api/mcp is unknown)
try:
    from runs.mcp.asgi import endpoint as _mcp_endpoint  # noqa: E402
    from runs.mcp.asgi import is_mcp_path  # noqa: E402

    mcp_endpoint = _mcp_endpoint
except ImportError:
    pass


async def http_app(scope, receive, send):
    if mcp_endpoint is not None and is_mcp_path(scope.get("path", "")):
        await mcp_endpoint(scope, receive, send)
    else:
        await django_asgi_app(scope, receive, send)


async def lifespan_app(scope, receive, send):
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            if mcp_endpoint is not None:
                await mcp_endpoint.start()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            if mcp_endpoint is not None:
                await mcp_endpoint.stop()
            await send({"type": "lifespan.shutdown.complete"})
            return


install_daphne_body_limit()  # daphne reads whole bodies before calling the app: refuse earlier
install_daphne_request_limits()  # long URLs and large headers: 414 and 431, not a dropped connection
install_daphne_graceful_shutdown()  # SIGTERM: follow streams end, websockets close 1001, exit in seconds

# Background work (deliveries, imports, experiments, sweeps) is `manage.py worker`'s: the workers
# look at the outbox when they start and every 30 s, so a server start schedules nothing.

from runs.telemetry.otlp_worker import start_with_server  # noqa: E402

# The server's OTLP worker (embedded profile) starts with it, not on the first OTLP request; and
# spans the queue took before a crash or a restart are stored now, not when the next request comes.
start_with_server()

from runs.telemetry.gc_tuning import settle_heap  # noqa: E402

application = ProtocolTypeRouter(
    {
        # One body limit for every way in (pages, REST, OTLP, MCP), before anything reads the body.
        "http": BodyLimitASGI(http_app),
        "websocket": AllowedHostsOriginValidator(
            DeferredAuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
        "lifespan": lifespan_app,
    }
)

# What the server loaded to serve (Django, the apps, the ASGI stack) is frozen out of the garbage
# collector's scans, and its youngest generation made larger: an OTLP request's 15,000 short-lived
# objects no longer set off collections, a full one walking all of Django among them
# (runs/telemetry/gc_tuning.py).
settle_heap()
