"""Who the MCP server says it is, and which protocol revisions it serves.

Kept apart from the server module so the discovery files can describe the endpoint cheaply.
"""

from __future__ import annotations

from importlib import metadata

from runs.selectors.bundles import PROTOCOL_VERSION

SERVER_NAME = "workbench"
SERVER_TITLE = "Workbench"
SERVER_DESCRIPTION = (
    "Runs, gates, artifacts and signed bundles of protocol "
    f"{PROTOCOL_VERSION}: list and read runs, verify and validate bundles, start runs, resolve gates, "
    "write artifacts, export bundles, and ask a human reviewer for a decision."
)

SDK_PROTOCOL_VERSIONS: tuple[str, ...] = ()  # the revisions the installed SDK can speak
try:
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

    SDK_PROTOCOL_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
except ImportError:  # pragma: no cover - the MCP extra is not installed
    pass

# Served here: the stateless 2026-07-28 core and the two handshake revisions before it. The SDK
# also answers 2024-11-05 and 2025-03-26 clients; they are not advertised (not tested here).
ADVERTISED = ("2025-06-18", "2025-11-25", "2026-07-28")
MCP_PROTOCOL_VERSIONS: tuple[str, ...] = tuple(v for v in ADVERTISED if v in SDK_PROTOCOL_VERSIONS)


def server_version() -> str:
    try:
        return metadata.version("workbench")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0.0.0"


def mcp_server_info() -> dict[str, str]:
    return {
        "name": SERVER_NAME,
        "title": SERVER_TITLE,
        "version": server_version(),
        "description": SERVER_DESCRIPTION,
    }
