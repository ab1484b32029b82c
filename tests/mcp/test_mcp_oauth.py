"""OAuth 2.1 for /api/mcp, end to end: the official MCP SDK's OAuth client (OAuthClientProvider)
against a real daphne process. Discovery (RFC 9728 protected-resource metadata, RFC 8414
authorization-server metadata), dynamic client registration (RFC 7591), the authorization code
with PKCE S256 (the consent page driven by alice's browser session: she picks the workspace and
the scopes), the token, tool calls in both protocol modes, workspace isolation, revocation from
the tokens page. And the refusals: PKCE plain or missing, a client naming its own workspace, a
consent without CSRF token, a cancelled consent (no token for anybody).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import secrets
from urllib.parse import parse_qs, urlencode, urlparse

import httpx
import pytest

from tests.conftest import LINEAR_WORKFLOW
from tests.live.cluster import Cluster

pytest.importorskip("mcp")
pytest.importorskip("oauth2_provider")

import httpx2  # noqa: E402
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider  # noqa: E402
from mcp.client.client import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken  # noqa: E402

REDIRECT = "http://127.0.0.1:9/callback"  # never contacted: the test reads the redirect itself

SECOND_WORKSPACE = r"""
import json
from runs import actions
from runs.actions.workspaces import get_or_create_workspace, add_member
from django.contrib.auth import get_user_model
alice = get_user_model().objects.get(username="alice")
acme = get_or_create_workspace("acme", name="Acme")
globex = get_or_create_workspace("globex", name="Globex")
add_member(globex, alice, "owner")
actions.do_start_run(workspace=globex, workflow=json.loads('WORKFLOW'), actor="user:alice", run_id="run_globex")
print("IDS " + json.dumps({"acme": acme.pk, "globex": globex.pk}))
"""


@pytest.fixture(scope="module")
def server():
    with Cluster(database="sqlite", servers=1) as cluster:
        seed = cluster.seed(workflow=LINEAR_WORKFLOW, run_id="run_acme")
        import json

        out = cluster.python(SECOND_WORKSPACE.replace("WORKFLOW", json.dumps(LINEAR_WORKFLOW)))
        ids = json.loads(next(line for line in out.splitlines() if line.startswith("IDS "))[4:])
        yield {
            "cluster": cluster,
            "base": cluster.url(0, ""),
            "url": cluster.url(0, "/api/mcp"),
            "session": seed["sessions"]["alice"],
            "ids": ids,
        }


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens) -> None:
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client_info) -> None:
        self.client = client_info


def browser(server) -> httpx.Client:
    """Alice's signed-in browser."""
    return httpx.Client(base_url=server["base"], cookies={"sessionid": server["session"]}, timeout=30)


def hidden_fields(page: str) -> dict[str, str]:
    return {
        name: value.replace("&amp;", "&").replace("&quot;", '"')
        for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page)
    }


class Person:
    """Alice at the consent page: what she sees, what she chooses."""

    def __init__(self, server, *, workspace: str = "acme", grant=("read", "write"), allow: bool = True):
        self.server, self.workspace, self.grant, self.allow = server, workspace, grant, allow
        self.page = ""
        self.redirect: str | None = None

    async def redirect_handler(self, authorization_url: str) -> None:
        def consent() -> str:
            with browser(self.server) as http:
                page = http.get(authorization_url)
                assert page.status_code == 200, page.text[:500]
                self.page = page.text
                data = {**hidden_fields(page.text), "workspace": self.workspace, "grant": list(self.grant)}
                if self.allow:
                    data["allow"] = "on"
                answer = http.post(authorization_url, data=data)
                assert answer.status_code == 302, answer.text[:500]
                return answer.headers["location"]

        self.redirect = await asyncio.to_thread(consent)

    async def callback_handler(self) -> AuthorizationCodeResult:
        query = parse_qs(urlparse(self.redirect).query)
        assert "code" in query, self.redirect
        return AuthorizationCodeResult(
            code=query["code"][0], state=query["state"][0], iss=query.get("iss", [None])[0]
        )


def provider(server, person: Person, storage: MemoryStorage) -> OAuthClientProvider:
    return OAuthClientProvider(
        server_url=server["url"],
        client_metadata=OAuthClientMetadata(
            client_name="Test MCP host",
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=person.redirect_handler,
        callback_handler=person.callback_handler,
    )


def oauth_client(server, auth: OAuthClientProvider, mode: str) -> Client:
    http = httpx2.AsyncClient(auth=auth, timeout=60)
    return Client(streamable_http_client(server["url"], http_client=http), mode=mode)


def list_runs_with(server, access_token: str) -> httpx.Response:
    """A raw MCP tools/call of list_runs with this bearer token (no SDK: the status is read)."""
    return httpx.post(
        server["url"],
        headers={
            "Authorization": f"Bearer {access_token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-06-18",
        },
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "list_runs", "arguments": {}},
        },
        timeout=30,
    )


def error_text(result) -> str:
    assert result.is_error, result
    return " ".join(getattr(block, "text", "") for block in result.content)


def test_discovery_documents(server):
    base = server["base"]
    anonymous = httpx.post(
        server["url"],
        headers={"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"},
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "list_runs", "arguments": {}},
        },
        timeout=30,
    )
    assert anonymous.status_code == 401
    challenge = anonymous.headers["www-authenticate"]
    assert challenge == f'Bearer resource_metadata="{base}/.well-known/oauth-protected-resource"'
    assert "UNAUTHENTICATED" in anonymous.json()["error"]["message"]

    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/api/mcp"):
        prm = httpx.get(base + path, timeout=30).json()
        assert prm["resource"] == server["url"]
        assert prm["authorization_servers"] == [base]
        assert prm["scopes_supported"] == ["read", "write", "review"]
    asm = httpx.get(base + "/.well-known/oauth-authorization-server", timeout=30).json()
    assert asm["issuer"] == base
    assert asm["code_challenge_methods_supported"] == ["S256"]
    assert asm["response_types_supported"] == ["code"]
    assert set(asm["grant_types_supported"]) == {"authorization_code", "refresh_token"}
    assert asm["registration_endpoint"] == base + "/oauth/register/"
    assert asm["authorization_endpoint"] == base + "/oauth/authorize/"
    assert "none" in asm["token_endpoint_auth_methods_supported"]


def test_an_mcp_host_signs_in_with_oauth_and_is_bound_to_one_workspace(server):
    person = Person(server, workspace="acme", grant=("read", "write"))
    storage = MemoryStorage()
    auth = provider(server, person, storage)

    async def host():
        async with oauth_client(server, auth, "auto") as c:
            listed = await c.call_tool("list_runs", {})  # 401 -> discovery, registration, consent, token
            assert not listed.is_error, listed
            ids = [r["id"] for r in listed.structured_content["runs"]]
            # workspace B's run reads exactly like a missing one
            foreign = error_text(await c.call_tool("get_run", {"runId": "run_globex"}))
            missing = error_text(await c.call_tool("get_run", {"runId": "run_nope"}))
            started = await c.call_tool("start_run", {"workflow": LINEAR_WORKFLOW, "runId": "run_oauth"})
            review = error_text(
                await c.call_tool(
                    "resolve_gate",
                    {"runId": "run_acme", "stepId": "review", "gate": "PAUSE_BEFORE", "decision": "approved"},
                )
            )
        async with oauth_client(server, auth, "legacy") as c:  # the stored token, no second consent
            legacy = await c.call_tool("get_run", {"runId": "run_oauth"})
        return ids, foreign, missing, started, review, legacy

    ids, foreign, missing, started, review, legacy = asyncio.run(host())
    # The consent page named the client and the scopes, and offered alice's workspaces.
    assert "Test MCP host" in person.page and "Acme" in person.page and "Globex" in person.page
    assert set(re.findall(r'name="grant" value="(\w+)"', person.page)) == {"read", "write", "review"}
    assert ids == ["run_acme"]
    assert "UNKNOWN_RUN" in foreign and foreign.replace("run_globex", "X") == missing.replace("run_nope", "X")
    assert not started.is_error and started.structured_content["created"] is True
    assert "FORBIDDEN" in review  # review was not granted
    assert not legacy.is_error and legacy.structured_content["id"] == "run_oauth"
    token = storage.tokens
    assert token is not None and set(token.scope.split()) == {
        "read",
        "write",
        f"workspace:{server['ids']['acme']}",
    }
    assert storage.client is not None and storage.client.client_id

    # Written as alice (the person who authorized the host), in acme.
    events = httpx.get(
        server["base"] + "/api/runs/run_oauth/events", cookies={"sessionid": server["session"]}, timeout=30
    )
    assert events.status_code == 200, events.text

    # Alice revokes it on the tokens page: the access token and its refresh token stop working.
    with browser(server) as http:
        page = http.get("/workspace/tokens/")
        assert "Test MCP host" in page.text
        forms = re.findall(r'<form method="post" action="(/workspace/tokens/oauth/\d+/revoke/)">', page.text)
        assert len(forms) == 1
        csrf = hidden_fields(page.text)["csrfmiddlewaretoken"]
        assert http.post(forms[0], data={"csrfmiddlewaretoken": csrf}).status_code == 302
        assert (
            "Test MCP host"
            not in http.get("/workspace/tokens/").text.split("oauth-heading")[1].split("</section>")[0]
        )
    refused = list_runs_with(server, token.access_token)
    assert refused.status_code == 401
    assert 'error="invalid_token"' in refused.headers["www-authenticate"]
    renewed = httpx.post(
        server["base"] + "/oauth/token/",
        data={
            "grant_type": "refresh_token",
            "refresh_token": token.refresh_token,
            "client_id": storage.client.client_id,
        },
        timeout=30,
    )
    assert renewed.status_code == 400 and renewed.json()["error"] == "invalid_grant"


def test_a_token_of_workspace_b_sees_only_b(server):
    person = Person(server, workspace="globex", grant=("read",))
    auth = provider(server, person, MemoryStorage())

    async def host():
        async with oauth_client(server, auth, "auto") as c:
            listed = (await c.call_tool("list_runs", {})).structured_content["runs"]
            acme = error_text(await c.call_tool("get_run", {"runId": "run_acme"}))
            write = error_text(await c.call_tool("start_run", {"workflow": LINEAR_WORKFLOW}))
        return [r["id"] for r in listed], acme, write

    ids, acme, write = asyncio.run(host())
    assert ids == ["run_globex"]
    assert "UNKNOWN_RUN" in acme
    assert "FORBIDDEN" in write


# --------------------------------------------------------------------------------------------
# Refusals: nothing is issued


def _register(server) -> str:
    answer = httpx.post(
        server["base"] + "/oauth/register/",
        json={
            "client_name": "raw client",
            "redirect_uris": [REDIRECT],
            "grant_types": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_method": "none",
        },
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    return answer.json()["client_id"]


def _authorize_url(server, client_id: str, **extra) -> str:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "scope": "read",
        "state": "s1",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        **extra,
    }
    params = {k: v for k, v in params.items() if v is not None}
    return server["base"] + "/oauth/authorize/?" + urlencode(params)


def _count_tokens(server) -> int:
    out = server["cluster"].python(
        "from oauth2_provider.models import AccessToken, Grant\n"
        "tokens = AccessToken.objects.filter(application__name='raw client')\n"
        "print('COUNT', tokens.exclude(scope='oauth2_provider:registration').count() "
        "+ Grant.objects.filter(application__name='raw client').count())"
    )
    return int(out.split("COUNT", 1)[1].split()[0])


def test_pkce_s256_only_and_no_workspace_chosen_by_the_client(server):
    client_id = _register(server)
    with browser(server) as http:
        for extra in (
            {"code_challenge_method": "plain"},
            {"code_challenge": None, "code_challenge_method": None},
            {"scope": f"read workspace:{server['ids']['globex']}"},
            {"response_type": "token"},
        ):
            answer = http.get(_authorize_url(server, client_id, **extra))
            location = answer.headers.get("location", "")
            assert answer.status_code in (302, 400), (extra, answer.status_code)
            assert "code=" not in location, (extra, location)
            assert answer.status_code == 400 or "error=" in location, (extra, location)
    assert _count_tokens(server) == 0


def test_the_consent_needs_csrf_and_a_cancel_grants_nothing(server):
    client_id = _register(server)
    url = _authorize_url(server, client_id)
    with browser(server) as http:
        page = http.get(url)
        assert page.status_code == 200 and "raw client" in page.text
        fields = {**hidden_fields(page.text), "workspace": "acme", "grant": ["read"], "allow": "on"}
        forged = {k: v for k, v in fields.items() if k != "csrfmiddlewaretoken"}
        with httpx.Client(
            base_url=server["base"], cookies={"sessionid": server["session"]}, timeout=30
        ) as other:
            assert other.post(url, data=forged).status_code == 403  # no CSRF token: refused
        cancelled = http.post(url, data={k: v for k, v in fields.items() if k != "allow"})
        assert cancelled.status_code == 302
        assert "error=access_denied" in cancelled.headers["location"]
        # A workspace alice is not a member of is not on offer, and posting one is refused.
        intruder = http.post(url, data={**fields, "workspace": "initech"})
        assert intruder.status_code == 400
    assert _count_tokens(server) == 0


def test_a_signed_out_visitor_is_sent_to_sign_in(server):
    client_id = _register(server)
    answer = httpx.get(_authorize_url(server, client_id), timeout=30)
    assert answer.status_code == 302 and "/accounts/login/" in answer.headers["location"]


def test_no_token_without_a_person_consenting(server):
    """A client that registers for client credentials, or tries alice's password, gets nothing:
    only the authorization code (a person's consent) and its refresh issue tokens."""
    registered = httpx.post(
        server["base"] + "/oauth/register/",
        json={
            "client_name": "raw client",
            "grant_types": ["client_credentials"],
            "token_endpoint_auth_method": "client_secret_post",
        },
        timeout=30,
    )
    assert registered.status_code == 201, registered.text
    client = registered.json()
    for grant in (
        {"grant_type": "client_credentials", "scope": "read"},
        {"grant_type": "password", "username": "alice", "password": "alice-password-123", "scope": "read"},
    ):
        answer = httpx.post(
            server["base"] + "/oauth/token/",
            data={**grant, "client_id": client["client_id"], "client_secret": client["client_secret"]},
            timeout=30,
        )
        assert answer.status_code in (400, 401), (grant["grant_type"], answer.status_code, answer.text)
        assert "access_token" not in answer.text
    assert _count_tokens(server) == 0


def _code_for(server, client_id: str) -> tuple[str, str]:
    """A fresh authorization code (alice consents over HTTP) and its PKCE verifier."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    url = _authorize_url(server, client_id, code_challenge=challenge)
    with browser(server) as http:
        page = http.get(url)
        fields = {**hidden_fields(page.text), "workspace": "acme", "grant": ["read"], "allow": "on"}
        answer = http.post(url, data=fields)
    assert answer.status_code == 302, answer.text[:300]
    return parse_qs(urlparse(answer.headers["location"]).query)["code"][0], verifier


def _exchange(server, client_id: str, code: str, verifier: str) -> httpx.Response:
    return httpx.post(
        server["base"] + "/oauth/token/",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT,
            "client_id": client_id,
            "code_verifier": verifier,
        },
        timeout=30,
    )


def _list_runs_status(server, access_token: str) -> int:
    return list_runs_with(server, access_token).status_code


def test_a_replayed_code_revokes_the_tokens_it_gave(server):
    """OAuth 2.1 4.1.3: a code exchanged twice was leaked; the second exchange is refused and
    every token the first gave (the refreshed one too) stops working (issue 54)."""
    client_id = _register(server)
    code, verifier = _code_for(server, client_id)
    first = _exchange(server, client_id, code, verifier)
    assert first.status_code == 200, first.text
    tokens = first.json()
    assert _list_runs_status(server, tokens["access_token"]) == 200
    refreshed = httpx.post(
        server["base"] + "/oauth/token/",
        data={
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
            "client_id": client_id,
        },
        timeout=30,
    )
    assert refreshed.status_code == 200, refreshed.text
    renewed = refreshed.json()
    assert _list_runs_status(server, renewed["access_token"]) == 200

    replay = _exchange(server, client_id, code, verifier)
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert _list_runs_status(server, renewed["access_token"]) == 401
    again = httpx.post(
        server["base"] + "/oauth/token/",
        data={
            "grant_type": "refresh_token",
            "refresh_token": renewed["refresh_token"],
            "client_id": client_id,
        },
        timeout=30,
    )
    assert again.status_code == 400

    # another client's code, never replayed, keeps its token
    other = _register(server)
    code2, verifier2 = _code_for(server, other)
    kept = _exchange(server, other, code2, verifier2).json()
    assert _list_runs_status(server, kept["access_token"]) == 200


def test_registration_refuses_plain_http_off_loopback(server):
    for uri in ("http://evil.example/callback", "http://10.0.0.5/cb"):
        answer = httpx.post(
            server["base"] + "/oauth/register/",
            json={
                "client_name": "raw client",
                "redirect_uris": [REDIRECT, uri],
                "token_endpoint_auth_method": "none",
            },
            timeout=30,
        )
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"] == "invalid_redirect_uri" and uri in answer.json()["error_description"]
    for uri in ("https://host.example/cb", "http://localhost:3000/cb", "http://[::1]:9/cb"):
        answer = httpx.post(
            server["base"] + "/oauth/register/",
            json={"client_name": "raw client", "redirect_uris": [uri], "token_endpoint_auth_method": "none"},
            timeout=30,
        )
        assert answer.status_code == 201, (uri, answer.text)
