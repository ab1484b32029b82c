"""Every route the server answers, read from the URL resolver and the websocket router.

The outsider matrix (tests/security/test_outsider_matrix.py) is generated from these lists, so a
route added tomorrow is tested tomorrow without anyone remembering to. Each route is classified
by its path parameters (``PARAM_KINDS``) or by name (``ROUTE_CLASSES``); a route that fits
neither makes the suite fail with a message saying where to add it.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from urllib.parse import quote

from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RegexPattern, RoutePattern

WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")

# --------------------------------------------------------------------------------------------
# The classification table. Keep it small: a parameter kind covers every route that has it.

# Path parameters that name an object of one workspace: the matrix fills them with the victim
# workspace's object (and with a missing one of the same length, to compare the two 404s).
PARAM_KINDS: dict[str, str] = {
    "run_id": "run",
    "execution_id": "execution",  # a playground execution
    "key_id": "token",  # an API token's public key id
    "key": "cache_key",  # /api/cache/<key>: an LLM cache key of the workspace's response cache
    "invitation_id": "invitation",  # a workspace's invitation (only its invitee may answer it)
    "webhook_id": "webhook",  # /api/webhooks/<id>: a workspace's webhook
    "delivery_id": "delivery",  # one delivery of a webhook (its webhook-id)
    "oauth_token_id": "oauth_token",  # an OAuth access token a member granted an MCP host
    "dataset_id": "dataset",  # /api/datasets/<id>: a workspace's dataset (evals)
    "experiment_id": "experiment",  # /api/experiments/<id>: a workspace's experiment (evals)
    "prompt_name": "prompt",  # a prompt of one workspace (its name may hold "/": folders)
    "job_id": "import_job",  # /api/bundles/jobs/<id>: a workspace's background bundle import
    "promotion_id": "promotion",  # a promotion request of a prompt's protected label
    "queue_id": "queue",  # an annotation queue (review)
    "item_id": "queue_item",  # an item of an annotation queue (below its queue)
    "monitor_id": "monitor",  # /api/monitors/<id>: a workspace's monitor (runs.actions.monitors)
    "judge_id": "judge",  # a gate judge (judges)
    # Parameters below a run: they only ever narrow a run the caller must see first.
    "seq": "seq",
    "artifact_key": "artifact_key",
}

# Routes that are not about one workspace's objects, keyed by URL name (namespace:name) or, for
# unnamed patterns, by their path. "public": answers anyone (the anonymous check is skipped);
# "staff": Django's admin (staff only, no workspace objects); "auth": the sign-in machinery whose
# parameters are signed tokens, not workspace objects.
ROUTE_CLASSES: dict[str, str] = {
    "llms_txt": "public",
    "llms_full_txt": "public",
    "agents_md": "public",
    "robots_txt": "public",
    "sitemap_xml": "public",
    "security_md": "public",
    "security_txt": "public",
    "mcp_json": "public",
    "jwks_json": "public",  # public signing keys (no private half, no workspace names)
    "signing_keys_json": "public",  # their validity (notBefore/notAfter/revokedAt per kid)
    "login": "public",
    "admin:login": "public",
    "admin:logout": "public",
    "password_reset": "public",
    "password_reset_done": "public",
    "password_reset_confirm": "auth",
    "password_reset_complete": "public",
    "api:openapi-json": "public",
    "api:openapi-view": "public",
    "api:health": "public",
    "api:api-root": "public",
    "api/^(?P<path>.*)$": "public",  # unknown API paths: a JSON 404 for anyone
    "runs:home": "public",  # a redirect to the run list
    "runs:demo": "public",  # the read-only public demo run
    "docs": "public",  # the documentation site (workbench/docs.py): static files, GET/HEAD only
    "docs_file": "public",  # one file of it (`path` is a file of the built site, not a workspace object)
    "admin/": "staff",  # (prefix) Django's admin site
    # OAuth for MCP hosts (accounts.oauth_urls): metadata documents, and endpoints that
    # authenticate OAuth clients themselves (open registration, token, revocation).
    "oauth2_provider:oauth-server-metadata": "public",
    "oauth2_provider:oauth-resource-metadata": "public",
    "oauth2_provider:oauth-resource-metadata-mcp": "public",
    "oauth2_provider:token": "public",
    "oauth2_provider:revoke-token": "public",
    "oauth2_provider:dcr-register": "public",
    # RFC 7592: the client id is a registered client's, opened with its registration access token.
    "oauth2_provider:dcr-register-management": "auth",
    # An e-mailed decision link (runs.pages.gatelinks): the token is a random secret bound to its
    # recipient and gate, not a workspace object; an unknown one is a 404 in words.
    "runs:gate_link": "auth",
}

# Writes a viewer may make: they change nothing a workspace owns (the matrix still checks that).
VIEWER_MAY_WRITE: dict[str, str] = {
    "logout": "signs the viewer out",
    "password_change": "their own password form",
    "runs:switch_workspace": "chooses among the viewer's own workspaces",
    "api:verify_bundle": "checks a bundle, stores nothing (read scope)",
    "playground:preview": "renders a request preview, stores nothing",
    "runs:notifications": "the viewer's own e-mail choices (an empty form changes nothing)",
    "runs:slack_links": "unlinks one of the viewer's own Slack links (another's is 404)",
    "runs:slack_link": "links a Slack user to the viewer themselves (a signed one-time token; their role still decides)",
    "oauth2_provider:authorize": "a person authorizes a client for themselves, within their role",
}


class Unclassified(AssertionError):
    pass


# --------------------------------------------------------------------------------------------
# Reading the resolver


@dataclass
class Route:
    path: str  # the full pattern, e.g. "runs/<runid:run_id>/" ("^...$" when a regex)
    name: str | None
    params: tuple[str, ...]
    methods: tuple[str, ...]  # methods worth trying (ninja: those the operation declares)
    is_api: bool
    converters: dict = field(default_factory=dict)
    regex: bool = False
    names: tuple[str, ...] = ()  # every URL name of this path (ninja: one per operation)
    callback: object = None

    @property
    def declared_methods(self) -> tuple[str, ...] | None:
        """The methods a ``require_http_methods`` decorator (require_GET, require_POST) allows."""
        fn = self.callback
        while fn is not None:
            code = getattr(fn, "__code__", None)
            if code is not None and "request_method_list" in code.co_freevars:
                cell = fn.__closure__[code.co_freevars.index("request_method_list")]
                return tuple(cell.cell_contents)
            fn = getattr(fn, "__wrapped__", None)
        return None

    @property
    def source_file(self) -> str | None:
        fn = inspect.unwrap(self.callback) if self.callback is not None else None
        module = inspect.getmodule(fn) if fn is not None else None
        return getattr(module, "__file__", None)

    @property
    def key(self) -> str:
        return self.name or self.path

    def named(self, *names: str) -> bool:
        return any(name in self.names for name in names) or self.key in names

    @property
    def kind(self) -> str:
        """ "public" / "staff" / "auth" from the table, else "scoped" (has workspace parameters) or
        "workspace" (no parameters: it shows the caller's own workspace)."""
        for key, kind in ROUTE_CLASSES.items():
            if self.named(key) or (key.endswith("/") and self.path.startswith(key)):
                return kind
        unknown = [p for p in self.params if p not in PARAM_KINDS]
        if unknown or self.regex:
            raise Unclassified(
                f"route {self.path!r} ({self.name}) has parameters {unknown or self.params} that "
                "tests/security/routes.py cannot classify: add the parameter to PARAM_KINDS (if it "
                "names an object of one workspace) or the route to ROUTE_CLASSES, so the outsider "
                "matrix knows how to test it"
            )
        return "scoped" if self.params else "workspace"

    def url(self, values: dict[str, object]) -> str:
        def fill(match: re.Match) -> str:
            name = match.group("name")
            converter = self.converters.get(name)
            value = values[name]
            text = converter.to_url(value) if converter is not None else str(value)
            return quote(text, safe="")  # as runs.ids.run_path_segment: one segment, always

        return "/" + re.sub(r"<(?:(?P<conv>[^>:]+):)?(?P<name>[^>]+)>", fill, self.path)


def _ninja_methods(callback) -> tuple[str, ...] | None:
    from ninja.operation import PathView

    fn = inspect.unwrap(callback)
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if isinstance(value, PathView):
            return tuple(sorted({m for op in value.operations for m in op.methods}))
    return None


def http_routes() -> list[Route]:
    routes: dict[str, Route] = {}

    def walk(patterns, prefix: str, namespace: str, converters: dict, regex: bool) -> None:
        for p in patterns:
            is_regex = regex or isinstance(p.pattern, RegexPattern)
            convs = {**converters, **(getattr(p.pattern, "converters", None) or {})}
            text = prefix + str(p.pattern)
            if isinstance(p, URLResolver):
                ns = f"{namespace}{p.namespace}:" if p.namespace else namespace
                walk(p.url_patterns, text, ns, convs, is_regex)
                continue
            assert isinstance(p, URLPattern)
            names = list(p.pattern.regex.groupindex)
            if isinstance(p.pattern, RoutePattern):
                names = re.findall(r"<(?:[^>:]+:)?([^>]+)>", str(p.pattern))
            prior = re.findall(r"<(?:[^>:]+:)?([^>]+)>", prefix)
            params = tuple(n for n in [*prior, *names] if n not in p.default_args)
            methods = _ninja_methods(p.callback)
            route = Route(
                path=text,
                name=f"{namespace}{p.name}" if p.name else None,
                params=params,
                methods=methods or ("GET", "POST"),
                is_api=methods is not None,
                converters=convs,
                regex=is_regex,
                callback=p.callback,
            )
            if text in routes:  # ninja repeats a path once per operation name: one route, all names
                routes[text].names += (route.name,) if route.name else ()
            else:
                route.names = (route.name,) if route.name else ()
                routes[text] = route

    walk(get_resolver().url_patterns, "", "", {}, False)
    return list(routes.values())


@dataclass
class SocketRoute:
    path: str
    params: tuple[str, ...]
    consumer: str

    @property
    def kind(self) -> str:
        unknown = [p for p in self.params if p not in PARAM_KINDS]
        if unknown:
            raise Unclassified(
                f"websocket route {self.path!r} has parameters {unknown} that tests/security/routes.py "
                "cannot classify: add them to PARAM_KINDS"
            )
        return "scoped" if self.params else "workspace"

    def url(self, values: dict[str, object]) -> str:
        path = re.sub(r"^\^|\$$", "", self.path)
        path = re.sub(
            r"\(\?P<(?P<name>\w+)>[^)]*\)",
            lambda m: quote(str(values[m.group("name")]), safe=""),
            path,
        )
        path = re.sub(
            r"<(?:[^>:]+:)?(?P<name>[^>]+)>", lambda m: quote(str(values[m.group("name")]), safe=""), path
        )
        return "/" + path


def socket_routes() -> list[SocketRoute]:
    from workbench.routing import websocket_urlpatterns

    out = []
    for p in websocket_urlpatterns:
        assert isinstance(p, URLPattern), "nested websocket routers: teach tests/security/routes.py"
        out.append(
            SocketRoute(
                path=str(p.pattern),
                params=tuple(p.pattern.regex.groupindex),
                consumer=getattr(p.callback, "consumer_class", p.callback).__name__,
            )
        )
    return out


# --------------------------------------------------------------------------------------------
# Query parameters: read from the views' source (pages) and the OpenAPI document (REST)

_GET_NAME = re.compile(
    r"""(?:GET\s*\.\s*(?:get|getlist)\(|_param\(\s*request\.GET\s*,)\s*["']([A-Za-z_][\w\-]{0,40})["']"""
)


def query_names(route: Route) -> list[str]:
    """The query parameters a route reads: its view module's ``request.GET`` reads, or the
    OpenAPI document's ``in: query`` parameters for a REST operation."""
    if route.is_api:
        from runs.api.app import api

        path = "/" + re.sub(r"<(?:[^>:]+:)?([^>]+)>", r"{\1}", route.path)
        item = api.get_openapi_schema(path_prefix="/api").get("paths", {}).get(path, {})
        return sorted(
            {
                p["name"]
                for op in item.values()
                if isinstance(op, dict)
                for p in op.get("parameters", [])
                if p.get("in") == "query"
            }
        )
    if route.source_file is None:
        return []
    with open(route.source_file) as handle:
        return sorted(set(_GET_NAME.findall(handle.read())))
