"""The outsider matrix, generated: every route of the URL resolver (pages, REST, discovery,
admin), every websocket route and every MCP tool, against

* anonymous callers: a redirect to sign-in, 401 or 404; never the victim's data;
* a user of another workspace, by session and by API token: the victim's objects answer exactly
  as missing ones do (same status, same body once the id itself is blanked out);
* a viewer and a read-only token trying every write: 403/404/405 and nothing changed.

Routes come from tests/security/routes.py, which fails the suite for a route it cannot
classify; nothing here lists routes by hand except the sample bodies writes need to get past
input validation (``WRITE_BODIES``; a missing one fails with a message saying so).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from django.db import transaction
from django.test import Client

from runs.web.request import SESSION_KEY
from tests.security import routes as r
from tests.security.world import CANARY, build_world, fingerprint, normalized

pytestmark = pytest.mark.django_db

LOGIN_PREFIXES = ("/accounts/login/", "/admin/login/")
ALL_ROUTES = r.http_routes()
# The four matrices below each take a minute or more over every route: each runs in PARTS tests of a
# quarter of the routes, so that the suite's workers share them instead of one worker ending last.
PARTS = 4
in_parts = pytest.mark.parametrize("part", range(PARTS))


def _routes(part: int) -> list[r.Route]:
    return ALL_ROUTES[part::PARTS]


@pytest.fixture
def world(workspace, other_workspace, alice, vera, charlie, workflow):
    return build_world(workspace, other_workspace, alice, vera, charlie, workflow)


def _client(user=None, token: str | None = None, workspace_header: str | None = None) -> Client:
    headers = {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if workspace_header:
        headers["X-Workspace"] = workspace_header
    client = Client(headers=headers)
    if user is not None:
        client.force_login(user)
    return client


def _send(client: Client, method: str, url: str, body: bytes = b"", content_type: str = "application/json"):
    response = client.generic(method, url, data=body, content_type=content_type)
    # Exports and transcripts stream: read them whole, as a client would.
    content = b"".join(response.streaming_content) if response.streaming else response.content
    return Reply(response.status_code, content, response.get("Location", ""))


@dataclass
class Reply:
    status_code: int
    content: bytes
    location: str


def _describe(response) -> str:
    return f"{response.status_code} {response.location} {response.content[:200]!r}"


def _leaks(response) -> bool:
    return CANARY.encode() in response.content


# --------------------------------------------------------------------------------------------
# Sample bodies for writes: valid input, so a missing permission check would go through.


def _bundle_bytes(world) -> bytes:
    from runs.selectors.bundles import export_bundle_bytes

    return export_bundle_bytes(world.run)


def _json(value) -> bytes:
    return json.dumps(value).encode()


WRITE_BODIES = {
    ("api:list_prompts", "POST"): lambda w: _json({"name": "victim/prompt-a1", "body": "x"}),
    ("api:move_label", "POST"): lambda w: _json(
        {"name": "victim/prompt-a1", "label": "staging", "version": 1}
    ),
    ("api:start_run", "POST"): lambda w: _json({"workflow": w.workflow, "runId": "run_new"}),
    ("api:put_run_state", "PUT"): lambda w: _json({"workflow": w.workflow, "run": {}, "events": []}),
    ("api:delete_run", "DELETE"): lambda w: b"",
    ("api:update_run", "PATCH"): lambda w: _json({"title": "renamed"}),
    ("api:append_events", "POST"): lambda w: _json(
        {"events": [__import__("workbench_sdk").make_event(w.run.run_id, "annotation", text="x")]}
    ),
    ("api:resolve_gate", "POST"): lambda w: _json(
        {"stepId": "review", "gate": "PAUSE_BEFORE", "decision": "approved"}
    ),
    ("api:write_artifact", "POST"): lambda w: _json(
        {"artifactKey": "notes", "typeId": "json", "data": {"a": 2}}
    ),
    ("api:patch_artifact", "POST"): lambda w: _json(
        {"fromVersion": 1, "patch": [{"op": "add", "path": "/b", "value": 1}]}
    ),
    ("api:annotate", "POST"): lambda w: _json({"text": "x"}),
    ("api:cancel", "POST"): lambda w: _json({}),
    ("api:fork", "POST"): lambda w: _json({"mode": "branch", "fromSeq": 1}),
    ("api:import_bundle", "POST"): lambda w: _bundle_bytes(w),
    ("api:verify_bundle", "POST"): lambda w: _bundle_bytes(w),
    ("otlp_traces", "POST"): lambda w: _json({"resourceSpans": []}),
    ("otlp_logs", "POST"): lambda w: _json({"resourceLogs": []}),
    ("api:create_webhook", "POST"): lambda w: _json(
        {"url": "https://hooks.example/new", "events": ["gate.requested"]}
    ),
    ("api:delete_webhook", "DELETE"): lambda w: b"",
    ("api:set_gate_policy", "PUT"): lambda w: _json({"policy": {"quorum": 2, "separationOfDuties": True}}),
    ("api:create_monitor", "POST"): lambda w: _json({"name": "new", "metric": "cost_day", "alert": 5}),
    ("api:update_monitor", "PATCH"): lambda w: _json({"alert": 9}),
    ("api:delete_monitor", "DELETE"): lambda w: b"",
    ("api:create_slack_app", "POST"): lambda w: _json(
        {"botToken": "xoxb-new", "signingSecret": "new-secret", "channel": "C0NEW"}
    ),
    ("api:change_slack_app", "PATCH"): lambda w: _json({"channel": "C0MOVED"}),
    ("api:delete_slack_app", "DELETE"): lambda w: b"",
    ("api:create_queue", "POST"): lambda w: _json(
        {"name": "new", "scoreConfigs": [{"name": "ok", "dataType": "BOOLEAN"}]}
    ),
    ("api:delete_queue", "DELETE"): lambda w: b"",
    ("api:create_judge", "POST"): lambda w: _json(
        {
            "name": "new",
            "kind": "rule",
            "workflowId": "wf",
            "stepId": "review",
            "gate": "PAUSE_BEFORE",
            "config": {"rules": {"errors": True}},
        }
    ),
    ("api:set_judge_policy", "PUT"): lambda w: _json({"showToReviewers": True}),
    ("api:add_items", "POST"): lambda w: _json({"items": [{"runId": w.run.run_id}]}),
    ("api:claim_next", "POST"): lambda w: b"",
    ("api:submit_scores", "POST"): lambda w: _json({"itemId": "qi_victim0000001", "scores": {"ok": True}}),
    ("api:retry_delivery", "POST"): lambda w: b"",
    ("api:create_dataset", "POST"): lambda w: _json({"name": "new"}),
    ("api:add_dataset_items", "POST"): lambda w: _json({"items": [{"input": 1}]}),
    ("api:delete_dataset_items", "POST"): lambda w: _json({"itemIds": ["i1"]}),
    ("api:create_experiment", "POST"): lambda w: _json({"datasetId": "ds_x", "name": "x"}),
    ("api:rescore_experiment", "POST"): lambda w: _json({"evaluator": {"kind": "exact"}}),
    ("api:cancel_experiment", "POST"): lambda w: b"",
    ("api:cancel_import_job", "POST"): lambda w: b"",
    ("api:check_budget", "POST"): lambda w: _json({"stepId": "review"}),
    ("api:set_run_budget", "POST"): lambda w: _json({"limit": "1"}),
    ("api:put_budgets", "PUT"): lambda w: _json({"monthlyCap": "1"}),
}


# Outsider answers other than 401/404/405 that still reveal nothing (checked equal to a missing id's).
OUTSIDER_STATUS = {
    # PUT is create-or-replace: the body is checked against the URL's id before any lookup.
    ("api:put_run_state", "PUT"): 400,
}


def _body_for(route: r.Route, method: str, world) -> bytes:
    make = next((WRITE_BODIES[(n, method)] for n in route.names if (n, method) in WRITE_BODIES), None)
    return make(world) if make else b""


def _has_body(route: r.Route, method: str) -> bool:
    return any((name, method) in WRITE_BODIES for name in (route.key, *route.names))


# --------------------------------------------------------------------------------------------
# The generator itself


def test_every_route_is_classified():
    """A route nobody taught the matrix about fails here (with where to teach it)."""
    problems = []
    for route in ALL_ROUTES:
        try:
            route.kind  # noqa: B018
        except r.Unclassified as exc:
            problems.append(str(exc))
    for route in r.socket_routes():
        try:
            route.kind  # noqa: B018
        except r.Unclassified as exc:
            problems.append(str(exc))
    assert not problems, "\n".join(problems)


def test_the_tables_have_no_stale_rows():
    """A row for a route that is gone would excuse the next route that takes its name."""
    names = {name for route in ALL_ROUTES for name in (route.key, *route.names)}
    paths = [route.path for route in ALL_ROUTES]
    stale = [key for key in r.ROUTE_CLASSES if key not in names and not any(p.startswith(key) for p in paths)]
    stale += [key for key in r.VIEWER_MAY_WRITE if key not in names]
    stale += [f"{key} {method}" for key, method in WRITE_BODIES if key not in names]
    stale += [f"{key} {method}" for key, method in OUTSIDER_STATUS if key not in names]
    assert not stale, f"rows in the classification tables match no route any more: {stale}"


def test_the_generator_sees_pages_api_and_sockets():
    keys = {name for route in ALL_ROUTES for name in (route.key, *route.names)}
    assert {"runs:detail", "api:get_run_state", "api:append_events", "playground:execution"} <= keys
    assert {"otlp_traces", "otlp_logs", "api:prices", "accounts:revoke_token", "api:cache_lookup"} <= keys
    methods = {name: route.methods for route in ALL_ROUTES for name in route.names}
    assert {"DELETE", "GET", "PUT"} <= set(methods["api:get_run_state"])  # read from ninja, not guessed
    assert {route.consumer for route in r.socket_routes()} >= {"RunLiveConsumer", "ExecutionConsumer"}


def test_an_unknown_parameter_is_refused_by_the_classifier():
    route = r.Route(
        path="things/<int:thing_pk>/", name="x:thing", params=("thing_pk",), methods=("GET",), is_api=False
    )
    with pytest.raises(r.Unclassified, match="PARAM_KINDS"):
        route.kind  # noqa: B018


# --------------------------------------------------------------------------------------------
# The matrix: one test per kind of caller, each walking every route (the world is built once per
# test; failures are collected and reported together, one line per route and method).


def _url(route: r.Route, world, *, missing: bool = False) -> str:
    if route.kind != "scoped":  # parameters that are not a workspace's objects
        return route.url({p: "1" for p in route.params})
    return route.url(world.values(missing=missing))


def _report(title: str, failures: list[str]) -> None:
    assert not failures, f"{title} ({len(failures)}):\n" + "\n".join(failures)


@in_parts
def test_anonymous(world, part):
    failures = []
    for route in _routes(part):
        public = route.kind in ("public", "auth")
        url = _url(route, world)
        for method in route.methods:
            response = _send(Client(), method, url)
            status = response.status_code
            ok = (
                public
                or status in (401, 404, 405)
                or (status == 302 and response.location.startswith(LOGIN_PREFIXES))
            )
            if not ok or _leaks(response) or status >= 500:
                failures.append(f"{route.key}: {method} {url}: {_describe(response)}")
    _report("anonymous callers must get sign-in, 401 or 404, never data", failures)


def _outsider_clients(world, route: r.Route) -> dict[str, Client]:
    clients = {
        "session": _client(world.charlie),
        "token": _client(token=world.outsider_token),
    }
    if route.is_api:
        # A session naming the victim workspace: the person is not a member there.
        clients["session+X-Workspace"] = _client(world.charlie, workspace_header=world.workspace.slug)
    else:
        # The pages' workspace choice (kept in the session) pointed at the victim's workspace.
        chosen = _client(world.charlie)
        session = chosen.session
        session[SESSION_KEY] = world.workspace.slug
        session.save()
        clients["session choosing the victim workspace"] = chosen
    return clients


def _isolated(cell):
    """Each cell in a savepoint rolled back afterwards: a write that wrongly succeeds (and is
    reported) cannot hide the cells after it by deleting or changing the victim's data."""

    def run(*args):
        with transaction.atomic():
            try:
                return cell(*args)
            finally:
                transaction.set_rollback(True)

    return run


def _unchanged(world, workspace) -> dict[str, list]:
    """The fingerprint every cell starts from: each cell's writes are rolled back, so it is the
    world's as built, taken once (before the first cell's request) instead of before every cell."""
    taken = world.__dict__.setdefault("_fingerprints", {})
    key = workspace.pk if workspace is not None else None
    if key not in taken:
        taken[key] = fingerprint(workspace)
    return taken[key]


@_isolated
def _outsider_cell(route: r.Route, world, label: str, client: Client, method: str) -> list[str]:
    kind = route.kind
    # Valid bodies only where the victim's object is named: elsewhere a valid write would just
    # change the outsider's own workspace (an imported bundle, a started run), which is theirs.
    body = _body_for(route, method, world) if kind == "scoped" else b""
    url = _url(route, world)
    where = f"{route.key}: {label} {method} {url}"
    before = _unchanged(world, world.workspace) if method in r.WRITE_METHODS else None
    foreign = _send(client, method, url, body)
    out = []
    if before is not None and fingerprint(world.workspace) != before:
        out.append(f"{where}: CHANGED DATA of the victim workspace ({_describe(foreign)})")
    if _leaks(foreign):
        out.append(f"{where}: the victim's data leaked: {_describe(foreign)}")
    if foreign.status_code >= 500:
        out.append(f"{where}: {_describe(foreign)}")
    if kind != "scoped":
        return out
    missing = _send(client, method, _url(route, world, missing=True), body)
    allowed = (401, 404, 405) if route.is_api else (302, 404, 405)
    excused = next(
        (OUTSIDER_STATUS[(n, method)] for n in route.names if (n, method) in OUTSIDER_STATUS), None
    )
    if foreign.status_code not in allowed and excused != foreign.status_code:
        out.append(f"{where}: expected one of {allowed}, got {_describe(foreign)}")
    elif foreign.status_code != missing.status_code:
        out.append(
            f"{where}: {foreign.status_code} for the victim's id, {missing.status_code} for a missing one"
        )
    elif normalized(foreign.content, world, missing=False) != normalized(
        missing.content, world, missing=True
    ):
        out.append(
            f"{where}: the body differs from a missing id's:\n    {foreign.content[:300]!r}\n    "
            f"{missing.content[:300]!r}"
        )
    return out


@in_parts
def test_outsider(world, part):
    """Another workspace's owner, by session and by token: the victim's objects read exactly like
    missing ones, every method; nothing of the victim's leaks from the other pages either."""
    failures = []
    for route in _routes(part):
        if route.kind in ("public", "auth"):
            continue
        for label, client in _outsider_clients(world, route).items():
            for method in route.methods:
                failures += _outsider_cell(route, world, label, client, method)
    _report("an outsider must not tell the victim's objects from missing ones", failures)


@_isolated
def _viewer_cell(
    route: r.Route, world, label: str, client: Client, method: str, may_write: bool
) -> list[str]:
    if route.is_api and not _has_body(route, method):
        return [
            f"no sample body for {route.key} {method}: add one to WRITE_BODIES in {__name__} "
            "(input validation runs before the permission check, so an empty body proves nothing)"
        ]
    url = _url(route, world)
    before = _unchanged(world, None)
    response = _send(client, method, url, _body_for(route, method, world))
    where = f"{route.key}: {label} {method} {url}"
    out = []
    if fingerprint() != before:
        out.append(f"{where}: CHANGED DATA ({_describe(response)})")
    if response.status_code >= 500:
        out.append(f"{where}: {_describe(response)}")
    elif not may_write and response.status_code not in (401, 403, 404, 405):
        # (401: a door that takes tokens only, such as OTLP, does not know the session)
        out.append(f"{where}: expected 403/404/405, got {_describe(response)}")
    return out


@in_parts
def test_viewer_cannot_write(world, part):
    """A viewer (session) and a read-only token of the victim workspace: every write refused,
    nothing changed."""
    failures = []
    for route in _routes(part):
        writes = sorted(set(route.methods) & set(r.WRITE_METHODS))
        if not writes or route.kind in ("staff", "auth"):
            continue
        may_write = route.named(*r.VIEWER_MAY_WRITE) or route.kind == "public"
        clients = {"viewer session": _client(world.vera)}
        if route.is_api or route.named("otlp_traces", "otlp_logs"):
            clients["read-only token"] = _client(token=world.read_token)
        for label, client in clients.items():
            for method in writes:
                failures += _viewer_cell(route, world, label, client, method, may_write)
    _report("a viewer or read-only token must not write", failures)


# Query values always sent where a route reads them: a follower (`?follow=1`) must not tail for
# the default 300 s.
QUERY_FIXED = {"wait": "0"}


@in_parts
def test_outsider_query_parameters(world, part):
    """Query parameters that name objects (``/compare/?a=<run>``, ``/playground/?prompt=<pk>``,
    ``?from_event=<run>:<seq>``, ``/api/cache/...?preferRunId=``): every parameter a route reads
    (from its view's source, or the OpenAPI document), set to each of the victim's objects, by
    the outsider on the outsider's own objects' URLs: nothing of the victim's comes back. The
    owner, sent the same values, does see the victim's data (the control)."""
    from urllib.parse import urlencode

    outsider = {"session": _client(world.charlie), "token": _client(token=world.outsider_token)}
    owner = _client(world.alice)
    failures, seen_by_owner, tried = [], set(), 0
    for route in _routes(part):
        if route.kind not in ("scoped", "workspace") or set(route.params) - {"run_id", "seq", "artifact_key"}:
            continue
        own = {"run_id": "run_globex", "seq": 1, "artifact_key": "notes"}
        theirs = route.url({**world.values(), **own}) if route.params else _url(route, world)
        names = r.query_names(route)
        fixed = {k: v for k, v in QUERY_FIXED.items() if k in names}
        for name in names:
            for value in world.query_values():
                query = "?" + urlencode({**fixed, name: value})
                for label, client in outsider.items():
                    tried += 1
                    response = _send(client, "GET", theirs + query)
                    if _leaks(response) or response.status_code >= 500:
                        failures.append(f"{route.key}: {label} GET {theirs}{query}: {_describe(response)}")
                if route.kind == "workspace" and _leaks(_send(owner, "GET", theirs + query)):
                    seen_by_owner.add((route.key, name))
    assert tried > 20
    _report("a query parameter must not reach another workspace's objects", failures)
    control = {("playground:page", "prompt"), ("playground:page", "from_event")}
    if "playground:page" not in {route.key for route in _routes(part)}:
        control = set()  # the control runs in the part holding the playground's page
    assert control <= seen_by_owner, (
        f"the control failed: the owner saw the victim's data only for {seen_by_owner}"
    )
