"""Discovery files for crawlers, assistants and agents: public, no session, generated per request.

Everything here is built from settings, the URL configuration (``reverse`` of URL names), the
REST API's own OpenAPI document and the MCP server's registered tools, so the files cannot drift
from what the site serves:

    /llms.txt                    H1 title, summary, links (llmstxt.org)
    /llms-full.txt               the long form: agents guide, REST reference, protocol overview
    /agents.md                   what an agent can do here: REST, MCP, auth, scoping, limits
    /robots.txt                  private surfaces disallowed, public ones allowed, the sitemap
    /sitemap.xml                 public pages (the demo run, the API docs, these files)
    /.well-known/security.txt    RFC 9116 (Contact, Expires, Policy, Canonical)
    /security.md                 the policy security.txt points at
    /.well-known/mcp.json        the MCP server descriptor (name, version, endpoint, transport, auth)
    /.well-known/jwks.json       the public keys that sign exported bundles (RFC 7517/8037 JWKS)
    /.well-known/workbench-keys.json  their validity: notBefore, notAfter, revokedAt per kid
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from xml.sax.saxutils import escape

import orjson
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import NoReverseMatch, reverse
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_safe

from accounts.models import Scope
from runs.api.other_doors import is_rest_operation
from runs.mcp.versions import MCP_PROTOCOL_VERSIONS, mcp_server_info
from runs.protocol.errors import ALL_ERROR_CODES
from runs.protocol.validate import EVENT_TYPES
from runs.protocol.validate_shapes import GATE_POLICIES
from runs.selectors.signing import jwks_document, validity_document

TEXT = "text/plain; charset=utf-8"
MARKDOWN = "text/markdown; charset=utf-8"
XML = "application/xml; charset=utf-8"
JSON = "application/json"

MCP_PATH = "/api/mcp"


# --------------------------------------------------------------------------------------------
# Where things are


def origin(request: HttpRequest) -> str:
    """The site's canonical origin: ``WORKBENCH_SITE_URL`` when set, else the request's own."""
    configured = (getattr(settings, "WORKBENCH_SITE_URL", "") or "").rstrip("/")
    if configured:
        return configured
    return f"{request.scheme}://{request.get_host()}"


def _path(name: str, *args: object) -> str | None:
    try:
        return reverse(name, args=args or None)
    except NoReverseMatch:
        return None


def _prefix(name: str, *args: object) -> str | None:
    """The first path segment of a named URL, as a directory (``/admin/``)."""
    path = _path(name, *args)
    if path is None:
        return None
    head = path.strip("/").split("/", 1)[0]
    return f"/{head}/" if head else None


def site_name() -> str:
    return getattr(settings, "WORKBENCH_SITE_NAME", "Workbench")


def site_summary() -> str:
    return getattr(
        settings,
        "WORKBENCH_SITE_SUMMARY",
        "A self-hosted control plane for LLM-powered work: runs of workflows recorded as append-only "
        "trace events, reviewers deciding at gates in the browser, traces, artifacts and cost for PMs, "
        "a prompt playground, and tamper-evident protocol 1.0.0 run bundles.",
    )


@functools.cache
def _openapi() -> dict:
    # Deferred: django-ninja's API object (every router) is built only when a discovery page asks.
    from runs.api.app import api

    return api.get_openapi_schema(path_prefix="/api")


def rest_operations() -> list[tuple[str, str, str]]:
    """``(METHOD, path, summary)`` of every REST operation, in the OpenAPI document's order."""
    out = []
    for path, item in _openapi().get("paths", {}).items():
        if not is_rest_operation(item):
            continue
        for method, op in item.items():
            if method in ("get", "post", "put", "patch", "delete"):
                out.append((method.upper(), path, op.get("summary") or op.get("operationId") or ""))
    return out


def mcp_tools() -> list[dict]:
    """Name, description and scope of each MCP tool, from the MCP server's own registry."""
    try:  # deferred: the MCP SDK is optional and costly to import
        from runs.mcp.server import tool_catalog
    except ImportError:  # the MCP server is an optional extra (`pip install workbench[mcp]`)
        return []
    return tool_catalog()


def scopes() -> list[tuple[str, str]]:

    return [(value, label) for value, label in Scope.choices]


# --------------------------------------------------------------------------------------------
# Builders (pure given a request: no database)


def build_llms_txt(request: HttpRequest) -> str:
    base = origin(request)
    links = [
        ("Agents guide", "agents_md", "REST, MCP, authentication, workspace scoping and limits"),
        ("Full text for model context", "llms_full_txt", "this summary, the agents guide and the API"),
        ("Demo run", "runs:demo", "a public, read-only run: timeline, gates, artifacts, ledger"),
        ("REST API (OpenAPI 3.1)", "api:openapi-json", "machine-readable description of /api/"),
        ("REST API docs", "api:openapi-view", "browsable API reference"),
        ("MCP server descriptor", "mcp_json", f"Streamable HTTP at {MCP_PATH}"),
        ("Security policy", "security_md", "how to report a vulnerability"),
    ]
    lines = [f"# {site_name()}", "", f"> {site_summary()}", ""]
    lines += [
        "Runs leave as RFC 8785 canonical JSON bundles with a SHA-256 integrity hash that any other "
        "implementation of protocol 1.0.0 can verify. Machines drive the same runs as people through a "
        "REST API, an MCP endpoint, a CLI and a Python client; every write goes through one set of actions "
        "and every read is scoped to one workspace.",
        "",
        "## Docs",
        "",
    ]
    optional: list[str] = []
    for title, name, note in links:
        path = _path(name)
        if path is None:
            continue
        entry = f"- [{title}]({base}{path}): {note}"
        (optional if name in ("security_md",) else lines).append(entry)
    lines += ["", "## Optional", "", *optional, ""]
    return "\n".join(lines)


def build_agents_md(request: HttpRequest) -> str:
    base = origin(request)
    rate = int(settings.WORKBENCH_RATE_LIMIT_PER_MINUTE)
    window = int(settings.WORKBENCH_RATE_LIMIT_WINDOW_SECONDS)
    ws_rate = int(getattr(settings, "WORKBENCH_RATE_LIMIT_WORKSPACE_PER_MINUTE", 0))
    body = int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
    bundle_body = int(getattr(settings, "WORKBENCH_MAX_BUNDLE_BYTES", body))
    tokens_page = _path("accounts:tokens") or "/workspace/tokens/"
    out = [
        f"# {site_name()} for agents",
        "",
        site_summary(),
        "",
        "## Authentication",
        "",
        "Machines authenticate with an API token of one workspace: `Authorization: Bearer wbt_<id>_<secret>`. "
        f"Owners create tokens at {base}{tokens_page} (or `manage.py tokens create`); a token is shown once "
        "and stored hashed. Each token carries scopes:",
        "",
        *[f"- `{value}`: {label}" for value, label in scopes()],
        "",
        "The same permission rules apply to pages, REST and MCP: a write needs a token whose scope allows "
        "it, whatever the surface.",
        "",
        "## Scoping",
        "",
        "A token sees its own workspace only. A run of another workspace answers exactly like a run that "
        "does not exist (`404 UNKNOWN_RUN` over REST, the same tool error over MCP): its existence is "
        "never revealed. Run ids are unique within a workspace.",
        "",
        "## Limits",
        "",
        f"- {rate} requests per {window} s per credential (a token may carry a lower limit of its own)"
        + (f"; {ws_rate} per {window} s per workspace in total." if ws_rate else "."),
        "- Over the limit: `429 RATE_LIMITED` with `Retry-After` (REST), the same refusal over MCP.",
        f"- Request bodies up to {body} bytes (`413 PAYLOAD_TOO_LARGE`); a bundle import "
        f"(`POST /api/bundles`) up to {bundle_body} bytes.",
        "- Writes accept an `Idempotency-Key` header: a retried request gets the first response.",
        "",
        "## REST",
        "",
        f"OpenAPI 3.1 at {base}{_path('api:openapi-json')}, browsable at {base}{_path('api:openapi-view')}. "
        'Errors are `{"error": message, "code": CODE}`.',
        "",
        *[f"- `{method} {path}`: {summary}" for method, path, summary in rest_operations()],
        "",
        "## MCP",
        "",
        f"Streamable HTTP at {base}{MCP_PATH} (stateless: any process answers any request). Descriptor: "
        f"{base}{_path('mcp_json')}. `tools/list` is public; every tool that reads or writes a run needs a "
        "bearer token with the scope named below (without one: HTTP 401). Resources `runs://{runId}` are "
        "the runs of the token's workspace as signed bundles. MCP hosts that sign in with OAuth 2.1 find "
        f"the way in the 401's `WWW-Authenticate` header ({base}{_path('oauth2_provider:oauth-resource-metadata')}): "
        "dynamic registration, the code grant with PKCE S256, and a consent page where the person picks "
        "the workspace and the scopes; the token is bound to that workspace, revocable on its tokens page.",
        "",
        "## Signed bundles",
        "",
        "Every export carries its integrity hash (`integrity.sha256`) and this instance's Ed25519 signature "
        "(`integrity.attestations`: a DSSE envelope around an in-toto statement naming the exporter and who "
        f"resolved each gate, as the server recorded it). Public keys: {base}{_path('jwks_json')}; their "
        f"validity (notBefore, notAfter, revokedAt): {base}{_path('signing_keys_json')}.",
        "",
    ]
    tools = mcp_tools()
    if tools:
        out += [f"- `{t['name']}` ({t['scope']}): {t['description']}" for t in tools]
    else:
        out.append("- (the MCP server is not installed in this deployment)")
    out += [
        "",
        "## OpenTelemetry",
        "",
        f"Applications instrumented with OpenTelemetry can record into a run: `POST {_path('otlp_traces')}` "
        "(OTLP/HTTP, protobuf or JSON) with a write-scoped token; name the run with the span or resource "
        "attribute `workbench.run.id` or the `X-Workbench-Run` header. GenAI spans become model calls and "
        "tool calls, other spans become spans of the run.",
        "",
        "## Human decisions",
        "",
        "Gates are decided by people in the browser. An agent can ask for a decision (the MCP tool "
        "`request_decision`): the call waits for the reviewer (up to `waitSeconds`), then returns the "
        "decision; while nobody has decided it answers that input is required (2026-07-28: the SDK asks "
        "again by itself and waits again) or `pending` with a ticket to pass back (older revisions).",
        "",
    ]
    return "\n".join(out)


def build_llms_full_txt(request: HttpRequest) -> str:

    parts = [
        build_llms_txt(request),
        "---",
        "",
        build_agents_md(request),
        "---",
        "",
        "# Protocol 1.0.0 in brief",
        "",
        "A workflow is a DAG of steps, each with a gate policy "
        f"({', '.join(f'`{p}`' for p in GATE_POLICIES)}). A run records what happened as trace events, "
        "appended in order and never rewritten. Event types:",
        "",
        *[f"- `{t}`" for t in EVENT_TYPES],
        "",
        "A run bundle is `{protocolVersion, run, trace, artifacts, ruleSets, engine?, integrity}`; "
        "`integrity.sha256` is the SHA-256 of the RFC 8785 canonical JSON of "
        "`{run, trace, artifacts, ruleSets, engine?}`.",
        "",
        "Error codes: " + ", ".join(f"`{c}`" for c in sorted(ALL_ERROR_CODES)) + ".",
        "",
    ]
    return "\n".join(parts)


def robots_rules() -> tuple[list[str], list[str]]:
    """(allowed, disallowed) path prefixes, from URL names."""
    allowed = [
        p
        for p in (
            _path("runs:demo"),
            _path("api:openapi-json"),
            _path("api:openapi-view"),
            _path("api:health"),
            _path("llms_txt"),
            _path("llms_full_txt"),
            _path("agents_md"),
            _path("security_md"),
            "/.well-known/",
        )
        if p
    ]
    disallowed = [
        p
        for p in (
            _prefix("api:health"),  # the REST API and the MCP endpoint
            _prefix("otlp_traces"),  # OTLP ingest
            _prefix("admin:index"),
            _prefix("login"),
            _prefix("accounts:tokens"),
            _prefix("playground:page"),
            _prefix("live:metrics"),
            _prefix("runs:list"),
            _path("runs:inbox"),
            _path("runs:ledger"),
            _path("runs:import"),
            _path("runs:members"),
            "/ws/",
        )
        if p
    ]
    return list(dict.fromkeys(allowed)), list(dict.fromkeys(disallowed))


def build_robots_txt(request: HttpRequest) -> str:
    allowed, disallowed = robots_rules()
    lines = ["User-agent: *"]
    lines += [f"Allow: {p}" for p in allowed]
    lines += [f"Disallow: {p}" for p in disallowed]
    lines += ["", f"Sitemap: {origin(request)}{_path('sitemap_xml')}", ""]
    return "\n".join(lines)


SITEMAP_PAGES: tuple[tuple[str, str, str], ...] = (
    # (url name, change frequency, priority)
    ("runs:demo", "weekly", "1.0"),
    ("llms_txt", "weekly", "0.8"),
    ("agents_md", "weekly", "0.8"),
    ("llms_full_txt", "weekly", "0.6"),
    ("api:openapi-view", "weekly", "0.6"),
    ("api:openapi-json", "weekly", "0.5"),
    ("security_md", "monthly", "0.3"),
)


def build_sitemap_xml(request: HttpRequest) -> str:
    base = origin(request)
    urls = []
    for name, freq, priority in SITEMAP_PAGES:
        path = _path(name)
        if path is None:
            continue
        urls.append(
            f"  <url><loc>{escape(base + path)}</loc><changefreq>{freq}</changefreq>"
            f"<priority>{priority}</priority></url>"
        )
    return "\n".join(
        [
            '<?xml version="1.0" encoding="UTF-8"?>',
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">',
            *urls,
            "</urlset>",
            "",
        ]
    )


def security_contact(request: HttpRequest) -> str:
    configured = getattr(settings, "WORKBENCH_SECURITY_CONTACT", "") or ""
    if configured:
        return configured if ":" in configured else f"mailto:{configured}"
    admins = getattr(settings, "ADMINS", None) or []
    if admins:
        first = admins[0]
        email = first[1] if isinstance(first, tuple | list) else str(first)
        return f"mailto:{email}"
    return f"{origin(request)}{_path('security_md')}"


def security_expires(now: datetime | None = None) -> str:
    """RFC 9116 ``Expires``: ``WORKBENCH_SECURITY_TXT_DAYS`` ahead (under a year), at midnight UTC."""
    days = int(getattr(settings, "WORKBENCH_SECURITY_TXT_DAYS", 180))
    now = now or datetime.now(UTC)
    expires = (now + timedelta(days=days)).replace(hour=0, minute=0, second=0, microsecond=0)
    return expires.strftime("%Y-%m-%dT%H:%M:%SZ")


def build_security_txt(request: HttpRequest) -> str:
    base = origin(request)
    policy = getattr(settings, "WORKBENCH_SECURITY_POLICY_URL", "") or f"{base}{_path('security_md')}"
    return "\n".join(
        [
            f"Contact: {security_contact(request)}",
            f"Expires: {security_expires()}",
            f"Policy: {policy}",
            f"Canonical: {base}{_path('security_txt')}",
            "Preferred-Languages: en",
            "",
        ]
    )


def build_security_md(request: HttpRequest) -> str:
    contact = security_contact(request)
    if contact.startswith(("http://", "https://")):
        where = (
            "the operator of this deployment (no security contact is configured: WORKBENCH_SECURITY_CONTACT)"
        )
    else:
        where = contact
    return "\n".join(
        [
            f"# Security policy of {site_name()}",
            "",
            f"Report a vulnerability to {where}. Please include the affected URL or "
            "component, how to reproduce it and its impact; do not access data that is not yours, and give "
            "us reasonable time to fix the problem before disclosing it.",
            "",
            "In scope: this deployment's pages, its REST API, its MCP endpoint and its websockets; tenant "
            "isolation between workspaces (a run of another workspace must be indistinguishable from a "
            "missing one), token handling, bundle integrity verification.",
            "",
        ]
    )


def mcp_descriptor(request: HttpRequest) -> dict:

    base = origin(request)
    info = mcp_server_info()
    return {
        "name": info["name"],
        "title": info["title"],
        "version": info["version"],
        "description": info["description"],
        "endpoint": f"{base}{MCP_PATH}",
        "transport": {
            "type": "streamable-http",
            "url": f"{base}{MCP_PATH}",
            "stateless": True,
            "protocolVersions": list(MCP_PROTOCOL_VERSIONS),
        },
        "auth": {
            "type": "bearer",
            "header": "Authorization",
            "scheme": "Bearer",
            "tokenFormat": "wbt_<key id>_<secret>",
            "scopes": [value for value, _label in scopes()],
            "public": ["server/discover", "initialize", "tools/list", "resources/list"],
            "obtain": f"{base}{_path('accounts:tokens') or '/workspace/tokens/'}",
            # MCP authorization: OAuth 2.1, the code grant with PKCE S256, open registration.
            "oauth": {
                "protectedResourceMetadata": f"{base}{_path('oauth2_provider:oauth-resource-metadata')}",
                "authorizationServerMetadata": f"{base}{_path('oauth2_provider:oauth-server-metadata')}",
            },
        },
        "capabilities": {"tools": True, "resources": True},
        "tools": [{"name": t["name"], "scope": t["scope"]} for t in mcp_tools()],
        "resources": [{"uriTemplate": "runs://{runId}", "mimeType": "application/json"}],
        "documentation": f"{base}{_path('agents_md')}",
    }


# --------------------------------------------------------------------------------------------
# Views


def _view(builder: Callable[[HttpRequest], str | dict], content_type: str, *, max_age: int = 3600):
    @require_safe
    @cache_control(public=True, max_age=max_age)
    def view(request: HttpRequest) -> HttpResponse:
        body = builder(request)
        data = orjson.dumps(body, option=orjson.OPT_INDENT_2) if isinstance(body, dict) else body
        return HttpResponse(data, content_type=content_type)

    view.__name__ = builder.__name__.replace("build_", "")
    return view


llms_txt = _view(build_llms_txt, TEXT)
llms_full_txt = _view(build_llms_full_txt, TEXT)
agents_md = _view(build_agents_md, MARKDOWN)
robots_txt = _view(build_robots_txt, TEXT)
sitemap_xml = _view(build_sitemap_xml, XML)
security_txt = _view(build_security_txt, TEXT)
security_md = _view(build_security_md, MARKDOWN)
mcp_json = _view(mcp_descriptor, JSON)
# Public keys only (runs.selectors.signing). Five minutes: a rotation or revocation shows soon.
KEYS_MAX_AGE = 300


def build_jwks_json(request: HttpRequest) -> dict:
    return jwks_document()


def build_signing_keys_json(request: HttpRequest) -> dict:
    return validity_document()


jwks_json = _view(build_jwks_json, "application/jwk-set+json", max_age=KEYS_MAX_AGE)
signing_keys_json = _view(build_signing_keys_json, JSON, max_age=KEYS_MAX_AGE)


def urlpatterns() -> Iterable:
    from django.urls import path

    return [
        path("llms.txt", llms_txt, name="llms_txt"),
        path("llms-full.txt", llms_full_txt, name="llms_full_txt"),
        path("agents.md", agents_md, name="agents_md"),
        path("robots.txt", robots_txt, name="robots_txt"),
        path("sitemap.xml", sitemap_xml, name="sitemap_xml"),
        path("security.md", security_md, name="security_md"),
        path(".well-known/security.txt", security_txt, name="security_txt"),
        path(".well-known/mcp.json", mcp_json, name="mcp_json"),
        path(".well-known/jwks.json", jwks_json, name="jwks_json"),
        path(".well-known/workbench-keys.json", signing_keys_json, name="signing_keys_json"),
    ]
