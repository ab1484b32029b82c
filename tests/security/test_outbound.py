"""Outbound requests, one policy (issue 23 §4): every request the server makes goes through the
egress guard (runs.providers.egress) with one setting, WORKBENCH_EGRESS_ALLOW.

- IPv6 spellings of an internal IPv4 address (IPv4-compatible, NAT64, 6to4, Teredo) are refused.
- A workspace member's base URL reaches loopback only with the operator's allowance (embedded
  profile included); the operator's own global provider still reaches a local model there.
- An error never echoes more of a foreign response body than a short, escaped excerpt.
- OTLP export goes through the same guard (checked when connecting: no DNS rebinding).
"""

from __future__ import annotations

import ipaddress
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from playground import compose as c
from playground.models import Execution, ModelEntry, ProviderConfig
from runs.providers import ProviderError, call, egress
from tests.fakes.loopback import LoopbackServer, Reply
from tests.fakes.openai_api import FakeOpenAI
from tests.task_backends import IMMEDIATE, task_backend

# -- addresses ---------------------------------------------------------------------------------

EMBEDDED_INTERNAL = [
    "::127.0.0.1",  # IPv4-compatible
    "::10.0.0.7",
    "::169.254.169.254",
    "64:ff9b::7f00:1",  # NAT64 well-known prefix -> 127.0.0.1
    "64:ff9b::a9fe:a9fe",  # -> 169.254.169.254
    "64:ff9b::a00:7",  # -> 10.0.0.7
    "64:ff9b:1::7f00:1",  # local-use NAT64
    "64:ff9b:1:7f00:0:100::",  # local-use NAT64, RFC 6052 /48 layout -> 127.0.0.1
    "2002:7f00:1::1",  # 6to4 -> 127.0.0.1
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1
    "::ffff:127.0.0.1",  # IPv4-mapped
]


@pytest.mark.parametrize("address", EMBEDDED_INTERNAL)
def test_ipv6_spellings_of_internal_ipv4_addresses_are_refused(address):
    with pytest.raises(egress.EgressRefused) as err:
        egress.check_address(address)
    assert err.value.code == "ADDRESS_NOT_ALLOWED" and "WORKBENCH_EGRESS_ALLOW" in err.value.message


@pytest.mark.parametrize("address", ["::127.0.0.1", "64:ff9b::7f00:1"])
def test_refused_in_a_url_too(address, monkeypatch):
    with pytest.raises(egress.EgressRefused) as err:
        egress.check_destination(f"http://[{address}]:6379/")
    assert err.value.code == "ADDRESS_NOT_ALLOWED"


def test_a_nat64_address_of_a_public_ipv4_address_stays_public():
    assert str(egress.check_address("64:ff9b::808:808")) == "64:ff9b::808:808"
    assert [str(a) for a in egress.destinations(ipaddress.ip_address("64:ff9b::808:808"))] == ["8.8.8.8"]
    assert str(egress.check_address("::8.8.8.8")) == "::808:808"


def test_an_allowance_with_a_port_opens_that_port_only():
    allow = ("127.0.0.1:11434",)
    assert str(egress.check_address("127.0.0.1", allow, 11434)) == "127.0.0.1"
    assert str(egress.check_address("::ffff:127.0.0.1", allow, 11434)) == "127.0.0.1"
    for port in (6379, 5432, 8000, None):
        with pytest.raises(egress.EgressRefused):
            egress.check_address("127.0.0.1", allow, port)
    assert str(egress.check_address("::1", ("[::1]:11434",), 11434)) == "::1"


def test_the_allowance_is_the_operator_setting_plus_loopback_for_the_operator_when_embedded():
    assert egress.allowance([], operator=False, embedded=True) == ()
    assert egress.allowance([], operator=True, embedded=False) == ()
    assert set(egress.allowance([], operator=True, embedded=True)) == set(egress.LOOPBACK)
    assert egress.allowance(["10.0.0.0/8"], operator=False, embedded=True) == ("10.0.0.0/8",)


# -- member vs operator ------------------------------------------------------------------------


@pytest.fixture
def embedded(settings):
    """The default profile, with no operator allowance; playground executions run at once."""
    settings.EMBEDDED_PROFILE = True
    settings.WORKBENCH_EGRESS_ALLOW = []
    with task_backend(IMMEDIATE):
        yield


@pytest.fixture
def newcomer(client, django_user_model, embedded):
    """A brand-new account: it owns its personal workspace."""
    user = django_user_model.objects.create_user(username="mallory", password="mallory-password-123")
    client.force_login(user)
    client.get("/playground/")  # the personal workspace is made on first visit
    return user


def add_provider(client, base_url):
    data = {
        "action": "add_provider",
        "name": "Local",
        "kind": "openai",
        "key_required": "",
        "base_url": base_url,
    }
    return client.post("/playground/settings/", data)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:11434/v1",
        "http://127.0.0.1:6379/",
        "http://localhost:5432/",
        "http://[::127.0.0.1]:8000/",
        "http://[64:ff9b::7f00:1]/",
        "http://10.0.0.7/v1",
    ],
)
def test_a_new_account_cannot_point_a_provider_at_the_servers_network(client, newcomer, url):
    r = add_provider(client, url)
    assert r.status_code == 400 and "ADDRESS_NOT_ALLOWED" in r.content.decode()
    assert not ProviderConfig.objects.filter(workspace__isnull=False).exists()


def test_the_operator_allowance_lets_an_owner_use_a_local_model_on_that_port_only(client, newcomer, settings):
    settings.WORKBENCH_EGRESS_ALLOW = ["127.0.0.1:11434"]
    assert add_provider(client, "http://127.0.0.1:11434/v1").status_code in (200, 302)
    assert ProviderConfig.objects.filter(
        workspace__isnull=False, base_url="http://127.0.0.1:11434/v1"
    ).exists()
    r = add_provider(client, "http://127.0.0.1:6379/")
    assert r.status_code == 400 and "ADDRESS_NOT_ALLOWED" in r.content.decode()


def _global_and_member(url: str, workspace) -> tuple[ProviderConfig, ProviderConfig]:
    operator = ProviderConfig.objects.create(
        workspace=None, name="Operator local", kind="openai", base_url=url, key_required=False, max_retries=0
    )
    member = ProviderConfig.objects.create(
        workspace=workspace,
        name="Member local",
        kind="openai",
        base_url=url,
        key_required=False,
        max_retries=0,
    )
    return operator, member


def _request(prompt="hi"):
    return c.compose(c.Session(prompt=prompt), c.ModelSpec("openai", "m")).request


def test_the_operators_local_model_works_a_members_same_url_does_not(db, workspace, embedded):
    with FakeOpenAI(api_key=None) as local:
        operator, member = _global_and_member(local.url + "/v1", workspace)
        assert call(operator.provider_settings(), _request("from the operator"), print).text == (
            "Echo: from the operator"
        )
        assert len(local.server.received) == 1
        with pytest.raises(ProviderError) as err:
            call(member.provider_settings(), _request("from a member"), print)
        assert err.value.code == "ADDRESS_NOT_ALLOWED"
        assert len(local.server.received) == 1  # nothing more reached the loopback server


def test_outside_the_embedded_profile_the_operator_lists_loopback_too(db, workspace, settings):
    settings.EMBEDDED_PROFILE = False
    settings.WORKBENCH_EGRESS_ALLOW = []
    with FakeOpenAI(api_key=None) as local:
        operator, _ = _global_and_member(local.url + "/v1", workspace)
        with pytest.raises(ProviderError) as err:
            call(operator.provider_settings(), _request(), print)
        assert err.value.code == "ADDRESS_NOT_ALLOWED" and local.server.received == []


def test_a_send_from_a_member_to_loopback_reaches_nothing(client, alice, workspace, embedded):
    """End to end: the send page refuses with a code, no execution runs, the server sees nothing."""
    with FakeOpenAI(api_key=None) as local:
        _, member = _global_and_member(local.url + "/v1", workspace)
        entry = ModelEntry.objects.create(
            workspace=workspace, provider=member, model_id="m", display_name="Local m"
        )
        client.force_login(alice)
        session = c.session_to_json(c.Session(prompt="hi"))
        r = client.post(
            "/playground/send/",
            json.dumps({"session": session, "model": entry.pk}),
            content_type="application/json",
        )
        assert r.status_code == 409 and r.json()["error"]["code"] == "ADDRESS_NOT_ALLOWED"
        assert local.server.received == []
        assert not Execution.objects.filter(status="completed").exists()


# -- echoed bodies -----------------------------------------------------------------------------

SECRET = "redis_version:7.2.4-internal-SECRET-MARKER"


class _InternalService:
    """An internal HTTP service (a status page) that answers every request with an error page."""

    def __init__(self, status: int, body: bytes, content_type: str) -> None:
        outer = self
        self.hits = 0

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                outer.hits += 1
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


PAGES = {
    "html": (
        500,
        b"<html><body>" + b"<p>status</p>\n" * 60 + SECRET.encode() + b"</body></html>",
        "text/html",
    ),
    "json-message": (
        400,
        json.dumps({"error": {"message": "x" * 2000 + SECRET, "type": "t" * 500}}).encode(),
        "application/json",
    ),
    "control-characters": (502, b"\x1b[31mred\x07\x00" + b"y" * 400 + SECRET.encode(), "text/plain"),
}


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("page", list(PAGES))
def test_an_error_never_echoes_a_foreign_body_beyond_a_short_excerpt(db, workspace, settings, kind, page):
    settings.WORKBENCH_EGRESS_ALLOW = ["127.0.0.0/8"]  # the operator allowed it: the call is made
    status, body, content_type = PAGES[page]
    service = _InternalService(status, body, content_type)
    try:
        provider = ProviderConfig.objects.create(
            workspace=workspace,
            name="Internal",
            kind=kind,
            base_url=service.url,
            key_required=False,
            max_retries=0,
        )
        request = c.compose(c.Session(prompt="hi"), c.ModelSpec(kind, "m")).request
        with pytest.raises(ProviderError) as err:
            call(provider.provider_settings(), request, print)
    finally:
        service.close()
    assert service.hits == 1
    shown = json.dumps(err.value.to_json())
    assert SECRET not in shown
    assert len(err.value.message) <= 300 and (
        err.value.provider_type is None or len(err.value.provider_type) <= 80
    )
    assert all(ch.isprintable() for ch in err.value.message)


# -- OTLP export: the same guard ---------------------------------------------------------------


@pytest.fixture
def collector():
    with LoopbackServer(lambda req: Reply(status=200, body={})) as server:
        yield server


def _run_doc():
    return (
        {"id": "run_x", "protocolVersion": "1.0.0", "status": "completed"},
        [
            {
                "id": "e1",
                "type": "run_status_changed",
                "runId": "run_x",
                "ts": "2026-01-01T00:00:00.000Z",
                "status": "completed",
            }
        ],
    )


def test_otlp_export_to_loopback_needs_the_allowance(collector):
    from runs.telemetry.otel_export import OtlpExportError, export_run_to_otlp

    run, events = _run_doc()
    with pytest.raises(OtlpExportError) as err:
        export_run_to_otlp(run, events, endpoint=collector.url, timeout=2)
    assert err.value.code == "ADDRESS_NOT_ALLOWED" and collector.received == []


def test_otlp_export_checks_the_address_it_connects_to(collector, monkeypatch):
    """DNS rebinding: the first lookup (the early check) answers public, the connection's own
    lookup answers loopback: the guarded session refuses, and nothing reaches the collector."""
    from runs.providers.egress_requests import guarded_session

    answers = iter([["93.184.216.34"]])
    monkeypatch.setattr(egress, "resolve", lambda host, port: next(answers, ["127.0.0.1"]))
    port = collector.url.rsplit(":", 1)[1]
    url = f"http://collector.rebind.test:{port}/v1/traces"
    egress.check_destination(url)  # passes: a public address
    session = guarded_session(())
    import requests

    with pytest.raises(requests.ConnectionError) as err:
        session.post(url, data=b"x", timeout=2)
    assert "ADDRESS_NOT_ALLOWED" in str(err.value)
    assert collector.received == []


def test_the_guarded_session_reaches_an_allowed_collector_by_the_checked_address(collector, monkeypatch):
    from runs.providers.egress_requests import guarded_session

    monkeypatch.setattr(egress, "resolve", lambda host, port: ["127.0.0.1"])
    port = collector.url.rsplit(":", 1)[1]
    response = guarded_session(("127.0.0.0/8",)).post(
        f"http://collector.internal.test:{port}/v1/traces", data=b"x"
    )
    assert response.status_code == 200
    assert collector.received[0].headers["host"].startswith("collector.internal.test:")


@pytest.mark.parametrize(
    ("host", "means"),
    [
        ("0177.0.0.1", "127.0.0.1"),
        ("0xa.1", "10.0.0.1"),
        ("3232235521", "192.168.0.1"),
        ("010.0.0.1", "8.0.0.1"),
    ],
)
def test_legacy_numeric_hosts_are_named_for_what_they_mean(host, means):
    from runs.providers import egress

    assert egress.legacy_ipv4(host) == means
    with pytest.raises(egress.EgressRefused) as refused:
        egress.check_url(f"https://{host}/v1")
    assert refused.value.code == "URL_NOT_ALLOWED" and means in refused.value.message


@pytest.mark.parametrize("host", ["127.0.0.1", "api.openai.com", "cafe.be", "1e100.net", "abc", "8.8.8.8"])
def test_ordinary_hosts_are_not_legacy_numbers(host):
    from runs.providers import egress

    assert egress.legacy_ipv4(host) is None
