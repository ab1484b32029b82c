"""Fuzz of the pages and the playground (forms, query strings, JSON bodies): no 5xx anywhere, and
nothing accepted that breaks the pages afterwards (a value that poisons the playground for the
whole workspace must be refused at input, with a clear error).

Generated, not listed: the routes come from the URL resolver (tests/security/routes.py) and the
parameter names from the views' own source (every ``GET.get("x")``, ``POST.get("x")``,
``int_param(request.GET, "x")`` ...), so a new page or field is fuzzed without anyone adding it.
The REST API has its own schema-driven fuzz (tests/api/test_openapi_fuzz.py).

Bounded: derandomized hypothesis with small example counts; each example runs in a savepoint
that is rolled back, so examples do not pile data up.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path

import pytest
from django.db import transaction
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.security import routes as r
from tests.security.world import VICTIM_RUN, build_world

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [*ROOT.glob("runs/pages/*.py"), *ROOT.glob("runs/*.py"), *ROOT.glob("playground/*.py")]
SOURCES += [*ROOT.glob("accounts/*.py")]
_NAME = r"""["']([A-Za-z_][\w\-]{0,40})["']"""
_PATTERNS = [
    re.compile(r"(?:GET|POST|params|post|query|data)\s*\.\s*(?:get|getlist|pop)\(\s*" + _NAME),
    re.compile(r"(?:GET|POST)\[\s*" + _NAME),
    re.compile(r"_param\(\s*[\w.]+\s*,\s*" + _NAME),
    re.compile(r"\baction\s*==\s*" + _NAME),
]
_ACTION_TUPLE = re.compile(r"\baction\s+in\s+\(([^)]*)\)")


def harvested(sources=SOURCES) -> tuple[list[str], list[str]]:
    """(parameter names, form ``action`` values) read from the views' source."""
    names, actions = set(), set()
    for path in sources:
        text = Path(path).read_text()
        for pattern in _PATTERNS:
            for match in pattern.finditer(text):
                (actions if pattern.pattern.startswith(r"\baction") else names).add(match.group(1))
        for match in _ACTION_TUPLE.finditer(text):
            actions.update(re.findall(r"""["']([\w\-]+)["']""", match.group(1)))
    return sorted(names), sorted(actions)


PARAM_NAMES, FORM_ACTIONS = harvested()

# Routes answered by pages (not the REST API, not the admin, not signing in and out).
SKIP = {"logout", "password_change", "password_change_done", "login"}
PAGE_ROUTES = [
    route
    for route in r.http_routes()
    if not route.is_api
    and route.kind in ("scoped", "workspace")
    and not route.named(*SKIP)
    and not route.path.startswith(("api/", "v1/"))
]
GET_ROUTES = [route for route in PAGE_ROUTES if "GET" in (route.declared_methods or ["GET"])]
POST_ROUTES = [route for route in PAGE_ROUTES if "POST" in (route.declared_methods or ["POST"])]


def _names_for(route: r.Route) -> list[str]:
    """The parameter names of the route's own view module, else every harvested name."""
    own = harvested([route.source_file])[0] if route.source_file else []
    return own or PARAM_NAMES


JSON_ROUTES = [
    route
    for route in PAGE_ROUTES
    if route.named("playground:send", "playground:preview", "playground:save_prompt")
]

HUGE_INT = "9" * 20
DEEP = "[" * 5000 + "]" * 5000
DEEP_OBJECT = '{"a":' * 3000 + "1" + "}" * 3000
HOSTILE_TEXT = [
    HUGE_INT,
    "-" + HUGE_INT,
    "1e30",
    "1e309",
    "-1e309",
    "NaN",
    "nan",
    "Infinity",
    "-Infinity",
    "inf",
    "sNaN",
    "-0",
    "0x1f",
    "1_000",
    "١٢٣",  # Arabic-Indic digits: isdigit() but not ASCII
    "",
    " ",
    "9999-12-31",
    "0001-01-01",
    "0000-00-00",
    "2026-02-30",
    "10000-01-01",
    "2026-13-45T25:61:61Z",
    "null",
    "[]",
    "{}",
    DEEP,
    DEEP_OBJECT,
    '{"a": NaN}',
    '"\\ud800"',
    "x" * 20_000,
    "a\x00b",
    "<script>alert(1)</script>",
    "../../etc/passwd",
    "%00",
    VICTIM_RUN,
]
# Raw (already percent-encoded) forms that str-based clients cannot produce: a lone surrogate
# (CESU bytes), invalid UTF-8, an encoded NUL.
RAW_ENCODED = ["%ED%A0%80", "%FF%FE", "%00", "%C0%AF"]

values = st.one_of(
    st.sampled_from(HOSTILE_TEXT),
    st.integers(min_value=-(10**25), max_value=10**25).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=30),
)
raw_values = st.one_of(values.map(lambda v: _quote(v)), st.sampled_from(RAW_ENCODED))


def _quote(value: str) -> str:
    from urllib.parse import quote

    return quote(value.encode("utf-8", "surrogatepass"), safe="")


FUZZ = settings(  # per route: the file stays well under a minute on a busy 2-core machine
    max_examples=6,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


@pytest.fixture
def world(workspace, other_workspace, alice, vera, charlie, workflow, settings):
    from playground.models import ModelEntry, ProviderConfig

    # sends are stored, never executed here (the suite's task backend runs nothing)
    settings.WORKBENCH_EGRESS_ALLOW = ["127.0.0.0/8"]
    settings.PLAYGROUND_SEND_RATE_PER_MINUTE = 0
    built = build_world(workspace, other_workspace, alice, vera, charlie, workflow)
    provider = ProviderConfig(
        workspace=workspace, name="Fake", kind="anthropic", base_url="http://127.0.0.1:9"
    )
    provider.set_api_key("k")
    provider.save()
    ModelEntry.objects.create(
        workspace=workspace,
        provider=provider,
        model_id="claude-fuzz",
        display_name="Fuzz",
        context_window=200_000,
        is_default=True,
        input_price=Decimal("3"),
        output_price=Decimal("15"),
    )
    return built


@pytest.fixture
def owner(world):
    client = Client(raise_request_exception=False)
    client.force_login(world.alice)
    return client


def _url(route: r.Route, world) -> str:
    if route.kind == "scoped":
        return route.url(world.values())
    return route.url({p: "1" for p in route.params})


# Pages that must still answer after any accepted input: a poisoned value shows up here.
def _after_pages(world) -> list[str]:
    return ["/playground/", "/playground/settings/", "/runs/", f"/runs/{VICTIM_RUN}/", "/ledger/"]


def _check_pages_still_answer(client: Client, world, what: str) -> None:
    for url in _after_pages(world):
        response = client.get(url)
        assert response.status_code < 500, f"after {what}, {url} answers {response.status_code}"


def _in_savepoint(fn):
    with transaction.atomic():
        try:
            return fn()
        finally:
            transaction.set_rollback(True)


def _describe(response) -> str:
    body = b"" if response.streaming else response.content[:300]
    return f"{response.status_code} {body!r}"


def test_the_harvest_finds_the_known_parameters():
    """The generator reads the views: if it stopped finding these, the fuzz would go blind."""
    assert {"after", "before", "at", "to", "from", "key", "mode", "model_id", "context_window"} <= set(
        PARAM_NAMES
    )
    assert {"prices", "add_model", "add_provider", "limits"} <= set(FORM_ACTIONS)
    assert any(route.named("playground:send") for route in JSON_ROUTES)
    assert len(PAGE_ROUTES) > 20


def _fields(data, route: r.Route, max_size: int, extra: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    names = st.one_of(st.sampled_from(_names_for(route) + list(extra)), st.sampled_from(PARAM_NAMES))
    return data.draw(st.lists(st.tuples(names, raw_values), min_size=1, max_size=max_size))


def _answers(client: Client, method: str, url: str) -> bool:
    """Whether the route takes ``method`` at all (a bare request is not refused with 405)."""
    return _in_savepoint(lambda: client.generic(method, url).status_code != 405)


def _answering(owner: Client, world, routes: list[r.Route], method: str):
    """(route, url) of the routes that take ``method`` at all."""
    for route in routes:
        url = _url(route, world)
        if _answers(owner, method, url):
            yield route, url


def test_query_strings(owner, world):
    """Every page that answers GET, with hostile values for the parameter names its view reads."""
    tried = 0
    for route, base in _answering(owner, world, GET_ROUTES, "GET"):
        tried += 1
        _query_fuzz(owner, route, base)()
    assert tried > 15


SWEEP = ["x", HUGE_INT, "-" + HUGE_INT, "NaN", "1e30", "-1", "0", "9999-12-31", "%ED%A0%80", "%FF", "%00"]
SWEEP += [_quote(DEEP[:4000]), _quote("run_victim_a1:1"), _quote("a" * 5000)]


def test_every_query_parameter_with_each_hostile_value(owner, world):
    """Not left to chance: each parameter a page reads (its view's ``request.GET``), each value
    of a fixed hostile list, one at a time."""
    tried = 0
    for route in GET_ROUTES:
        base = _url(route, world)
        for name in r.query_names(route):
            for value in SWEEP:
                tried += 1
                response = owner.get(f"{base}?{name}={value}")
                assert response.status_code < 500, f"GET {base}?{name}={value[:80]}: {_describe(response)}"
    assert tried > 200


def _query_fuzz(owner: Client, route: r.Route, base: str):
    @FUZZ
    @given(data=st.data(), htmx=st.booleans())
    def fuzz(data, htmx):
        query = "&".join(f"{name}={value}" for name, value in _fields(data, route, 4))
        url = f"{base}?{query}"
        response = owner.get(url, headers={"HX-Request": "true"} if htmx else {})
        assert response.status_code < 500, f"GET {url}: {_describe(response)}"

    return fuzz


def test_forms(owner, world):
    """Every page that takes POST, with hostile form fields (and every form ``action`` the views
    know); whatever is accepted must leave the pages answering."""
    from playground.models import ModelEntry

    pk = ModelEntry.objects.get(model_id="claude-fuzz").pk
    tried = 0
    for route, url in _answering(owner, world, POST_ROUTES, "POST"):
        tried += 1
        _form_fuzz(owner, world, route, url, pk)()
    assert tried > 8


_POST_NAME = re.compile(r"(?:POST|post)\s*\.\s*(?:get|getlist)\(\s*" + _NAME)


def _form_names(route: r.Route) -> tuple[list[str], list[str]]:
    """(fields, form actions) the route's view module reads from a POST."""
    text = Path(route.source_file).read_text() if route.source_file else ""
    return sorted(set(_POST_NAME.findall(text))), harvested([route.source_file])[
        1
    ] if route.source_file else []


FORM_SWEEP = ["x", HUGE_INT, "NaN", "1e30", "-1", "%ED%A0%80", "%00", _quote(DEEP[:4000])]


def _post_form(owner: Client, world, url: str, body: str) -> None:
    response = owner.generic("POST", url, body, content_type="application/x-www-form-urlencoded")
    assert response.status_code < 500, f"POST {url} {body[:300]}: {_describe(response)}"
    if response.status_code < 400:
        _check_pages_still_answer(owner, world, f"POST {url} {body[:200]}")


def test_every_form_with_each_hostile_value(owner, world):
    """Not left to chance: each page that takes POST, each form ``action`` its view knows, every
    field it reads set to one hostile value at a time. Accepted input must leave the pages
    answering (a value that poisons a later page must be refused at input)."""
    from playground.models import ModelEntry

    pk = ModelEntry.objects.get(model_id="claude-fuzz").pk
    tried = 0
    for route, url in _answering(owner, world, POST_ROUTES, "POST"):
        names, form_actions = _form_names(route)
        if not names:
            continue
        names += [f"m{pk}_input", f"m{pk}_output", f"m{pk}_currency"] if form_actions else []
        for action in form_actions or [""]:
            for value in FORM_SWEEP:
                tried += 1
                body = "&".join(
                    [f"action={action}", *(f"{name}={value}" for name in names if name != "action")]
                )
                _in_savepoint(lambda body=body, url=url: _post_form(owner, world, url, body))
    assert tried > 100


def _form_fuzz(owner: Client, world, route: r.Route, url: str, pk: int):
    @FUZZ
    @given(action=st.sampled_from(FORM_ACTIONS), data=st.data())
    def fuzz(action, data):
        fields = _fields(data, route, 6, extra=("m1_input", "m1_output", "m1_currency", "model", "provider"))
        pairs = [
            f"action={action}",
            *(f"{name.replace('m1_', f'm{pk}_')}={value}" for name, value in fields),
        ]
        body = "&".join(pairs)

        def attempt():
            response = owner.generic("POST", url, body, content_type="application/x-www-form-urlencoded")
            assert response.status_code < 500, f"POST {url} {body[:300]}: {_describe(response)}"
            if response.status_code < 400:
                _check_pages_still_answer(owner, world, f"POST {url} {body[:200]}")

        _in_savepoint(attempt)

    return fuzz


def _json_value():
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**22), max_value=10**22),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=20),
        st.sampled_from(["\ud800", "\udfff", "1e30", HUGE_INT]),
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
        ),
        max_leaves=8,
    )


SESSION_KEYS = ["prompt", "mode", "operation_type", "system_prompt", "history", "tools", "advanced"]
SESSION_KEYS += ["file", "cached", "tool_results", "thinking", "citations", "tool_use", "create_cache"]
RAW_JSON = [
    DEEP,
    DEEP_OBJECT,
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "[1e400]",
    '"\\ud800"',
    "{",
    "",
    "\x00",
]


def _encode(value) -> str:
    # json.dumps escapes lone surrogates (\ud800): the server sees them only after parsing.
    return json.dumps(value, allow_nan=True)


def _json_body(session: dict, top: dict, raw: str | None) -> str:
    if raw is not None:
        return raw
    parts = [
        f'"{k}": {v if isinstance(v, str) and v in RAW_JSON else _encode(v)}' for k, v in session.items()
    ]
    return _encode(top)[:-1] + (", " if top else "") + '"session": {' + ", ".join(parts) + "}}"


def test_playground_json(owner, world):
    """send, preview and save_prompt with hostile JSON: refused with a code, or accepted and
    harmless to the pages that come after."""
    assert JSON_ROUTES
    for route in JSON_ROUTES:
        _json_fuzz(owner, world, _url(route, world))()


# Values that parse but cannot be stored or sent on (json.dumps writes NaN and escapes \ud800).
HOSTILE_JSON = ["\ud800", "a\udfffb", float("nan"), float("inf"), 1e30, 10**20, -(10**20), {"enabled": True}]
HOSTILE_JSON += [
    [{"role": "user", "content": "\ud800"}],
    {"temperature": {"enabled": True, "value": float("nan")}},
]


def _json_fuzz(owner: Client, world, url: str):
    @settings(FUZZ, max_examples=20)
    @given(
        session=st.dictionaries(
            st.sampled_from(SESSION_KEYS),
            st.one_of(st.sampled_from(HOSTILE_JSON), st.sampled_from(RAW_JSON), _json_value()),
            min_size=1,
            max_size=5,
        ),
        top=st.dictionaries(
            st.sampled_from(["model", "name", "compare", "conversation", "columns"]),
            _json_value(),
            max_size=3,
        ),
        raw=st.one_of(st.none(), st.sampled_from(RAW_JSON)),
    )
    def fuzz(session, top, raw):
        body = _json_body(session, top, raw)

        def attempt():
            response = owner.generic("POST", url, body, content_type="application/json")
            assert response.status_code < 500, f"POST {url} {body[:300]!r}: {_describe(response)}"
            if response.status_code >= 400:
                error = json.loads(response.content)["error"]
                assert error["code"] and error["message"], response.content
            else:
                _check_pages_still_answer(owner, world, f"POST {url} {body[:200]!r}")

        _in_savepoint(attempt)

    return fuzz


# --------------------------------------------------------------------------------------------
# The inputs the review found, each by name (they must stay refused, not merely not-500).


@pytest.mark.parametrize("price", ["NaN", "Infinity", "-Infinity", "1e30", "sNaN", "-1", HUGE_INT])
def test_poisonous_prices_are_refused_with_a_code(owner, world, price):
    from playground.models import ModelEntry

    entry = ModelEntry.objects.get(model_id="claude-fuzz")
    response = owner.post(
        "/playground/settings/", {"action": "prices", f"m{entry.pk}_input": price, f"m{entry.pk}_output": "1"}
    )
    assert response.status_code == 400 and b"INVALID_PRICE" in response.content
    entry.refresh_from_db()
    assert entry.input_price == Decimal("3")
    _check_pages_still_answer(owner, world, "a refused price")


@pytest.mark.parametrize("window", [HUGE_INT, "1e30", "-5", "0", "١٢٣", "9" * 13])
def test_huge_context_windows_are_refused(owner, world, window):
    from playground.models import ModelEntry

    entry = ModelEntry.objects.get(model_id="claude-fuzz")
    response = owner.post(
        "/playground/settings/",
        {"action": "edit_model", "model": entry.pk, "model_id": "claude-fuzz", "context_window": window},
    )
    assert response.status_code == 400
    entry.refresh_from_db()
    assert entry.context_window == 200_000


@pytest.mark.parametrize("path", ["send", "preview", "prompts"])
@pytest.mark.parametrize(
    "body, refused",
    [
        (DEEP, True),  # thousands of levels: refused before anything reads it
        ('{"session": {"history": ' + DEEP + "}}", True),
        (
            '{"session": {"prompt": "\\ud800"}, "name": "x"}',
            True,
        ),  # a lone surrogate cannot be stored or sent
        ('{"session": {"system_prompt": "ok\\udfffok"}, "name": "x"}', True),
        ('{"session": {"advanced": {"temperature": {"enabled": true, "value": NaN}}}, "name": "x"}', True),
        (DEEP_OBJECT, False),  # deep, but under a key nobody reads: harmless
    ],
)
def test_playground_refuses_deep_json_and_lone_surrogates(owner, world, path, body, refused):
    response = owner.generic("POST", f"/playground/{path}/", body, content_type="application/json")
    assert response.status_code < 500, _describe(response)
    if refused:
        assert response.status_code == 400, _describe(response)
        assert json.loads(response.content)["error"]["code"]


@pytest.mark.parametrize("slug", ["acme\x00", "\x00", "a" * 65, "ünï", "globex'--"])
def test_workspace_choices_that_are_no_slug_name_no_workspace(owner, world, slug):
    """The pages' switch, the API's X-Workspace and the sockets all read a slug the caller typed:
    a NUL (which PostgreSQL cannot even compare) or any non-slug names nothing, without a 500."""
    from runs.live.consumers import authorize_run

    assert owner.post("/workspace/switch/", {"workspace": slug}).status_code == 404
    api = owner.get("/api/runs", headers={"X-Workspace": slug})
    assert api.status_code == 401, _describe(api)
    assert authorize_run(world.alice, VICTIM_RUN, slug) is not None  # falls back to their own workspace
