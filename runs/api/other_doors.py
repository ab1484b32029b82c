"""Endpoints the REST API's OpenAPI document describes although django-ninja does not serve them.

/api/mcp is served by the MCP SDK in the project's ASGI application (runs.mcp.asgi), not by a
ninja router; clients still look for every way in in /api/openapi.json. Each entry of ``PATHS``
is an OpenAPI 3.1 path item marked ``x-workbench-served-by``: generators of REST clients and the
schema fuzzer skip those (they are no REST operations), readers find them.
"""

from __future__ import annotations

from typing import Any

SERVED_BY = "x-workbench-served-by"
MCP_PROTOCOL_VERSIONS = ("2025-06-18", "2025-11-25", "2026-07-28")

_JSONRPC_REQUEST = {
    "type": "object",
    "required": ["jsonrpc", "method"],
    "properties": {
        "jsonrpc": {"const": "2.0"},
        "id": {"type": ["string", "integer"]},
        "method": {
            "type": "string",
            "examples": ["server/discover", "initialize", "tools/list", "tools/call", "resources/read"],
        },
        "params": {"type": "object"},
    },
}
_JSONRPC_RESPONSE = {
    "type": "object",
    "required": ["jsonrpc"],
    "properties": {
        "jsonrpc": {"const": "2.0"},
        "id": {"type": ["string", "integer", "null"]},
        "result": {"type": "object"},
        "error": {
            "type": "object",
            "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {}},
        },
    },
}


def _error(description: str, **headers: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": _JSONRPC_RESPONSE}},
    }
    if headers:
        out["headers"] = {
            name: {"schema": {"type": "string"}, "description": text} for name, text in headers.items()
        }
    return out


MCP_PATH_ITEM: dict[str, Any] = {
    SERVED_BY: "mcp",
    "summary": "Model Context Protocol server (Streamable HTTP)",
    "description": (
        "The MCP endpoint: JSON-RPC 2.0 over Streamable HTTP, stateless (any process answers any "
        f"request; no session id). Protocol revisions {', '.join(MCP_PROTOCOL_VERSIONS)} "
        "(2026-07-28: `server/discover` and single exchanges; older: `initialize` first). Tools: list, "
        "read, verify, validate, start, resolve gates, write artifacts, export bundles, fork, and "
        "`request_decision`, which waits for a reviewer's decision. Resources `runs://{runId}` are the "
        "runs of the caller's workspace as signed bundles. `server/discover`, `initialize` and "
        "`tools/list` are public; a tool call or a resource read without credentials is a 401 whose "
        "`WWW-Authenticate: Bearer resource_metadata=...` leads to the OAuth 2.1 sign-in "
        "(`/.well-known/oauth-protected-resource`). Descriptor: `/.well-known/mcp.json`."
    ),
    "post": {
        "operationId": "mcp",
        "tags": ["MCP"],
        "summary": "Send an MCP JSON-RPC message",
        "security": [{"TokenAuth": []}, {"OAuth2": ["read"]}, {}],
        "parameters": [
            {
                "name": "MCP-Protocol-Version",
                "in": "header",
                "required": False,
                "schema": {"type": "string", "enum": list(MCP_PROTOCOL_VERSIONS)},
                "description": "The negotiated revision (after `initialize`, or on every 2026-07-28 request).",
            }
        ],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _JSONRPC_REQUEST}},
        },
        "responses": {
            "200": {
                "description": "The JSON-RPC response (a tool's refusal is a result with `isError`).",
                "content": {"application/json": {"schema": _JSONRPC_RESPONSE}},
            },
            "401": _error(
                "No or an invalid credential where one is needed.",
                **{
                    "WWW-Authenticate": 'Bearer resource_metadata="<origin>/.well-known/oauth-protected-resource"'
                },
            ),
            "413": _error("The request body is over the upload limit."),
            "421": _error("A Host header this server does not serve (DNS-rebinding protection)."),
            "429": _error("Over the rate limit.", **{"Retry-After": "Seconds to wait."}),
        },
    },
}

_SLACK_ERROR = {"type": "object", "properties": {"error": {"type": "string"}, "code": {"type": "string"}}}

SLACK_PATH_ITEM: dict[str, Any] = {
    SERVED_BY: "slack",
    "summary": "Slack interactivity (gate buttons and the note modal)",
    "description": (
        "Slack's interactivity request URL for a connected Slack app (/api/slack/apps). Signed by Slack "
        "(`X-Slack-Signature` v0 with the app's signing secret, `X-Slack-Request-Timestamp` within 5 minutes); "
        "a request seen before is refused. The Slack user acts as the workspace member linked to them; an "
        "unlinked one, or a role that may not decide gates, is told so ephemerally and nothing is decided."
    ),
    "post": {
        "operationId": "slack_interactions",
        "tags": ["slack"],
        "summary": "Receive a Slack interaction",
        "security": [{}],
        "requestBody": {
            "required": True,
            "content": {
                "application/x-www-form-urlencoded": {
                    "schema": {
                        "type": "object",
                        "properties": {"payload": {"type": "string"}},
                        "required": ["payload"],
                    }
                }
            },
        },
        "responses": {
            "200": {"description": "Received (a refusal to the Slack user says why nothing was decided)."},
            "400": {
                "description": "Not an interaction with a Workbench gate.",
                "content": {"application/json": {"schema": _SLACK_ERROR}},
            },
            "401": {
                "description": "SLACK_SIGNATURE_MISSING, SLACK_STALE_REQUEST or SLACK_SIGNATURE_INVALID.",
                "content": {"application/json": {"schema": _SLACK_ERROR}},
            },
            "409": {
                "description": "SLACK_REPLAYED: the request was received before.",
                "content": {"application/json": {"schema": _SLACK_ERROR}},
            },
        },
    },
}

PATHS: dict[str, dict[str, Any]] = {
    "/api/mcp": MCP_PATH_ITEM,
    "/integrations/slack/interactions": SLACK_PATH_ITEM,
}

OAUTH2_SCHEME: dict[str, Any] = {
    "type": "oauth2",
    "description": (
        "OAuth 2.1 for MCP hosts: authorization code with PKCE (S256), dynamic client registration "
        "at /oauth/register/; a person picks the workspace on the consent page and the token is bound "
        "to it. Metadata: /.well-known/oauth-authorization-server."
    ),
    "flows": {
        "authorizationCode": {
            "authorizationUrl": "/oauth/authorize/",
            "tokenUrl": "/oauth/token/",
            "refreshUrl": "/oauth/token/",
            "scopes": {
                "read": "Read runs, events and bundles",
                "write": "Start runs, append events, import, cancel, delete",
                "review": "Resolve gates, edit artifacts, annotate",
            },
        }
    },
}


def with_other_doors(schema: dict) -> dict:
    """``schema`` (the REST document) with the endpoints ninja does not serve added."""
    paths = schema.setdefault("paths", {})
    for path, item in PATHS.items():
        paths.setdefault(path, item)
    components = schema.setdefault("components", {})
    components.setdefault("securitySchemes", {}).setdefault("OAuth2", OAUTH2_SCHEME)
    return schema


def is_rest_operation(path_item: dict) -> bool:
    return SERVED_BY not in path_item
