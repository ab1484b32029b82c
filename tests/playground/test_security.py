"""No server secret and no internal address is reachable through a workspace's provider settings.

The attacker is a brand-new account (it owns its personal workspace), the catcher a loopback
server that records every header it is sent.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction

from playground import actions
from playground import compose as c
from playground.models import Execution, ModelEntry, ProviderConfig
from runs.models import Membership
from runs.providers import ProviderError, ProviderSettings, call, egress
from tests.fakes.openai_api import FakeOpenAI

OPERATOR_SECRET = "sk-ant-operator-secret-0123456789"


def post_json(client, url, data):
    return client.post(url, json.dumps(data), content_type="application/json")


def session(prompt="hi"):
    return c.session_to_json(c.Session(prompt=prompt))


@pytest.fixture
def catcher():
    """An OpenAI-compatible server that accepts anything (and so sees whatever it is sent)."""
    with FakeOpenAI(api_key=None) as fake:
        yield fake


def sent_headers(fake) -> str:
    return json.dumps([r.headers for r in fake.server.received])


@pytest.fixture
def attacker(client, django_user_model, settings, immediate_tasks):
    user = django_user_model.objects.create_user(username="mallory", password="mallory-password-123")
    client.force_login(user)
    client.get("/playground/")  # the personal workspace is made on first visit
    return user


def add_provider(client, **fields):
    data = {"action": "add_provider", "name": "Mine", "kind": "openai", "key_required": "", **fields}
    return client.post("/playground/settings/", data)


def error_text(response) -> str:
    return response.content.decode()


# -- keys ----------------------------------------------------------------------------------


@pytest.mark.parametrize("variable", ["SECRET_KEY", "ANTHROPIC_API_KEY", "DATABASE_URL"])
def test_a_new_account_cannot_name_a_server_environment_variable(
    client, attacker, catcher, monkeypatch, variable, django_capture_on_commit_callbacks
):
    monkeypatch.setenv(variable, OPERATOR_SECRET)
    r = add_provider(client, base_url=catcher.url + "/v1", api_key_env=variable)
    assert r.status_code == 400 and "KEY_ENV_NOT_ALLOWED" in error_text(r)
    assert not ProviderConfig.objects.filter(workspace__isnull=False).exists()
    # Without the variable the provider is created, and what it sends carries no server secret.
    assert add_provider(client, base_url=catcher.url + "/v1").status_code == 302
    provider = ProviderConfig.objects.get(name="Mine")
    assert provider.api_key_env == "" and provider.api_key() is None
    client.post("/playground/settings/", {"action": "add_model", "provider": provider.pk, "model_id": "m"})
    model = ModelEntry.objects.get(provider=provider)
    with django_capture_on_commit_callbacks(execute=True):
        r = post_json(client, "/playground/send/", {"session": session(), "model": model.pk})
    assert r.status_code == 202
    assert len(catcher.server.received) == 1
    assert OPERATOR_SECRET not in sent_headers(catcher)


def test_storage_refuses_a_workspace_provider_reading_the_environment(workspace):
    with pytest.raises(IntegrityError), transaction.atomic():
        ProviderConfig.objects.create(workspace=workspace, name="x", kind="openai", api_key_env="SECRET_KEY")


def test_operator_key_goes_only_to_the_endpoints_the_operator_listed(
    client,
    alice,
    workspace,
    anthropic_fake,
    monkeypatch,
    settings,
    django_capture_on_commit_callbacks,
    immediate_tasks,
):
    """Even a global provider whose base URL was changed does not carry the operator's key
    anywhere but the listed endpoints."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-anthropic-key")
    provider = ProviderConfig.objects.get(workspace__isnull=True, name="Anthropic")
    assert provider.key_source == "operator key" and provider.missing() is None
    provider.base_url = anthropic_fake.url
    provider.max_retries = 0
    provider.save()
    assert provider.api_key() is None and provider.missing() is not None
    client.force_login(alice)
    model = ModelEntry.objects.get(provider=provider, model_id="claude-sonnet-4-6")
    r = post_json(client, "/playground/send/", {"session": session(), "model": model.pk})
    assert r.status_code == 409 and r.json()["error"]["code"] == "NO_PROVIDER"
    assert anthropic_fake.server.received == []
    # Listed by the operator: now it is used, and only there.
    settings.PLAYGROUND_OPERATOR_KEYS = {"ANTHROPIC_API_KEY": [anthropic_fake.url]}
    assert provider.api_key() == "test-anthropic-key"
    with django_capture_on_commit_callbacks(execute=True):
        r = post_json(client, "/playground/send/", {"session": session(), "model": model.pk})
    assert r.status_code == 202
    assert Execution.objects.get().status == "completed"


def test_settings_page_reveals_no_environment_variable(client, alice, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", OPERATOR_SECRET)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client.force_login(alice)
    for url in ("/playground/settings/", "/playground/"):
        html = client.get(url).content.decode()
        assert "ANTHROPIC_API_KEY" not in html and "OPENAI_API_KEY" not in html
        assert "environment variable" not in html and OPERATOR_SECRET not in html
        assert 'name="api_key_env"' not in html


def test_a_stored_key_is_encrypted_and_never_shown_again(client, alice, workspace):
    client.force_login(alice)
    r = add_provider(client, api_key="sk-typed-in-secret-4321", key_required="on")
    assert r.status_code == 302
    provider = ProviderConfig.objects.get(workspace=workspace)
    assert "sk-typed-in-secret-4321" not in provider.api_key_encrypted
    assert provider.api_key() == "sk-typed-in-secret-4321"
    page = client.get("/playground/settings/").content.decode()
    assert "sk-typed-in-secret-4321" not in page and "…4321" in page
    r = client.post(
        "/playground/settings/", {"action": "set_key", "provider": provider.pk, "api_key": "bad key\u00e9"}
    )
    assert r.status_code == 400 and "INVALID_API_KEY" in error_text(r)
    provider.refresh_from_db()
    assert provider.api_key() == "sk-typed-in-secret-4321"


# -- addresses -------------------------------------------------------------------------------

REFUSED_URLS = {
    "http://127.0.0.1:11434/v1": "ADDRESS_NOT_ALLOWED",
    "http://localhost:8080/v1": "ADDRESS_NOT_ALLOWED",  # a name resolving to loopback
    "http://2130706433/v1": "URL_NOT_ALLOWED",  # 127.0.0.1 written as one number: named as such
    "http://10.1.2.3/v1": "ADDRESS_NOT_ALLOWED",
    "http://192.168.0.10/v1": "ADDRESS_NOT_ALLOWED",
    "http://169.254.169.254/latest/meta-data": "ADDRESS_NOT_ALLOWED",
    "http://[::1]:8080/v1": "ADDRESS_NOT_ALLOWED",
    "http://[fd00::1]/v1": "ADDRESS_NOT_ALLOWED",
    "http://[::ffff:127.0.0.1]/v1": "ADDRESS_NOT_ALLOWED",
    "http://0.0.0.0/v1": "ADDRESS_NOT_ALLOWED",
    "ftp://example.com/v1": "URL_NOT_ALLOWED",
    "file:///etc/passwd": "URL_NOT_ALLOWED",
    "gopher://127.0.0.1:6379/_INFO": "URL_NOT_ALLOWED",
    "http://user:pw@example.com/v1": "URL_NOT_ALLOWED",
    "http://exa mple.com/v1": "URL_NOT_ALLOWED",
}


@pytest.mark.parametrize("url", list(REFUSED_URLS))
def test_base_urls_to_internal_addresses_are_refused_when_saved(client, attacker, settings, url):
    settings.WORKBENCH_EGRESS_ALLOW = []
    r = add_provider(client, base_url=url)
    assert r.status_code == 400 and REFUSED_URLS[url] in error_text(r)
    assert not ProviderConfig.objects.filter(workspace__isnull=False).exists()


def test_the_address_is_checked_again_when_the_call_is_made(
    client, alice, fake_models, settings, anthropic_fake, django_capture_on_commit_callbacks
):
    """A provider saved while loopback was allowed (or stored some other way) is refused at send
    time once the operator no longer allows it: a clear code, and nothing reaches the address."""
    settings.WORKBENCH_EGRESS_ALLOW = []
    client.force_login(alice)
    r = post_json(client, "/playground/send/", {"session": session(), "model": fake_models["sonnet"].pk})
    assert r.status_code == 409 and r.json()["error"]["code"] == "ADDRESS_NOT_ALLOWED"
    assert anthropic_fake.server.received == []
    # The worker checks too (the send page could have been passed by a race).
    from playground import execute

    entry = fake_models["sonnet"]
    ex = execute.submit(
        workspace=entry.workspace,
        user=alice,
        entry=entry,
        composition=c.compose(c.Session(prompt="hi"), entry.spec()),
    )
    execute.process(ex.pk, worker_id="t")
    ex.refresh_from_db()
    assert ex.status == "failed" and ex.error_code == "ADDRESS_NOT_ALLOWED" and ex.error_status is None
    assert anthropic_fake.server.received == []


def _settings_for(fake, host: str, **kw) -> ProviderSettings:
    port = fake.url.rsplit(":", 1)[1]
    return ProviderSettings(
        "openai", api_key="test-openai-key", base_url=f"http://{host}:{port}/v1", max_retries=0, **kw
    )


def test_a_name_is_resolved_once_and_the_checked_address_is_the_one_connected_to(openai_fake, monkeypatch):
    """`provider.internal.test` exists only in this resolver: the request can only have arrived
    because the connection went to the address the check saw (the Host header keeps the name)."""
    monkeypatch.setattr(egress, "resolve", lambda host, port: ["127.0.0.1"])
    settings = _settings_for(openai_fake, "provider.internal.test", egress_allow=("127.0.0.0/8",))
    result = call(settings, c.compose(c.Session(prompt="pinned"), c.ModelSpec("openai", "m")).request, print)
    assert result.text == "Echo: pinned"
    assert openai_fake.server.received[0].headers["host"].startswith("provider.internal.test:")


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_dns_rebinding_is_refused_at_connect_time(openai_fake, anthropic_fake, monkeypatch, kind):
    """The first lookup answers a public address, the next ones loopback: the connection
    checks what it connects to, so nothing reaches the loopback server."""
    answers = iter([["93.184.216.34"]])
    monkeypatch.setattr(egress, "resolve", lambda host, port: next(answers, ["127.0.0.1"]))
    fake = openai_fake if kind == "openai" else anthropic_fake
    port = fake.url.rsplit(":", 1)[1]
    settings = ProviderSettings(
        kind, api_key="k", base_url=f"http://rebind.example.test:{port}", max_retries=1
    )
    with pytest.raises(ProviderError) as err:
        call(settings, c.compose(c.Session(prompt="x"), c.ModelSpec(kind, "m")).request, print)
    assert err.value.code == "ADDRESS_NOT_ALLOWED" and err.value.status is None
    assert fake.server.received == []


def test_a_name_with_one_private_address_among_public_ones_is_refused(monkeypatch):
    monkeypatch.setattr(egress, "resolve", lambda host, port: ["93.184.216.34", "10.0.0.7"])
    with pytest.raises(egress.EgressRefused) as err:
        egress.check_destination("https://mixed.example.test/v1")
    assert err.value.code == "ADDRESS_NOT_ALLOWED" and "10.0.0.7" in err.value.message


def test_public_addresses_pass_and_the_allowance_is_only_what_the_operator_lists():
    assert str(egress.check_address("93.184.216.34")) == "93.184.216.34"
    assert str(egress.check_address("127.0.0.1", ("127.0.0.0/8",))) == "127.0.0.1"
    for address in (
        "127.0.0.1",
        "10.0.0.1",
        "172.16.0.1",
        "100.64.0.1",
        "169.254.169.254",
        "fe80::1",
        "fd12::1",
    ):
        with pytest.raises(egress.EgressRefused):
            egress.check_address(address, ("192.168.0.0/16",))


# -- who manages providers ------------------------------------------------------------------


SETTINGS_POSTS = [
    {"action": "add_provider", "name": "X", "kind": "anthropic"},
    {"action": "set_key", "provider": "{provider}", "api_key": "sk-stolen-0000"},
    {"action": "add_model", "provider": "{provider}", "model_id": "m2"},
    {"action": "prices", "m{model}_input": "99", "m{model}_output": "", "m{model}_currency": "USD"},
    {"action": "default_model", "model": "{model}"},
]


@pytest.mark.parametrize("post", SETTINGS_POSTS, ids=[p["action"] for p in SETTINGS_POSTS])
def test_only_owners_manage_providers_keys_models_and_prices(client, bob, vera, charlie, fake_models, post):
    provider, model = fake_models["openai"], fake_models["local"]
    data = {k.format(model=model.pk): v.format(provider=provider.pk, model=model.pk) for k, v in post.items()}
    before = (
        list(ProviderConfig.objects.values()),
        list(ModelEntry.objects.values()),
    )
    for user in (bob, vera):
        client.force_login(user)
        assert client.post("/playground/settings/", data).status_code == 403
    client.force_login(charlie)  # an owner, but of another workspace: never reaches this one
    client.post("/playground/settings/", data)
    after = (list(ProviderConfig.objects.values()), list(ModelEntry.objects.values()))
    assert [r for r in after[0] if r["workspace_id"] != charlie_ws(charlie)] == before[0]
    assert [r for r in after[1] if r["workspace_id"] != charlie_ws(charlie)] == before[1]
    assert fake_models["openai"].api_key() == "test-openai-key"


def charlie_ws(user) -> int:
    return Membership.objects.get(user=user).workspace_id


def test_the_actions_refuse_a_non_owner_whatever_the_adapter(bob, workspace):
    membership = Membership.objects.get(user=bob, workspace=workspace)
    with pytest.raises(PermissionDenied):
        actions.do_add_provider(membership=membership, name="X", kind="openai")
    with pytest.raises(PermissionDenied):
        actions.do_set_prices(membership=membership, prices={})


@pytest.mark.parametrize(
    "value,code",
    [
        ("NaN", "INVALID_PRICE"),
        ("Infinity", "INVALID_PRICE"),
        ("-1", "INVALID_PRICE"),
        ("1e30", "INVALID_PRICE"),
        ("sNaN", "INVALID_PRICE"),
    ],
)
def test_prices_that_would_break_later_pages_are_refused(client, alice, fake_models, value, code):
    model = fake_models["local"]
    client.force_login(alice)
    r = client.post(
        "/playground/settings/",
        {
            "action": "prices",
            f"m{model.pk}_input": value,
            f"m{model.pk}_output": "1",
            f"m{model.pk}_currency": "usd",
        },
    )
    assert r.status_code == 400 and code in error_text(r)
    model.refresh_from_db()
    assert model.input_price is None and model.output_price is None
    assert client.get("/playground/").status_code == 200
    assert client.get("/playground/settings/").status_code == 200
    ok = client.post(
        "/playground/settings/",
        {
            "action": "prices",
            f"m{model.pk}_input": "0.5",
            f"m{model.pk}_output": "",
            f"m{model.pk}_currency": "eur",
        },
    )
    assert ok.status_code == 302
    model.refresh_from_db()
    assert model.input_price == Decimal("0.5") and model.currency == "EUR"


@pytest.mark.parametrize("window", ["99999999999999999999", "0", "-5", "1e9", "１２"])
def test_context_windows_are_bounded(client, alice, fake_models, window):
    client.force_login(alice)
    r = client.post(
        "/playground/settings/",
        {
            "action": "add_model",
            "provider": fake_models["openai"].pk,
            "model_id": "big",
            "context_window": window,
        },
    )
    assert r.status_code == 400 and not ModelEntry.objects.filter(model_id="big").exists()
    assert client.get("/playground/").status_code == 200


# -- sends spend money: a budget per workspace --------------------------------------------


def test_sends_are_limited_per_workspace(
    client, alice, bob, fake_models, settings, django_capture_on_commit_callbacks
):
    settings.PLAYGROUND_SEND_RATE_PER_MINUTE = 3
    statuses = []
    for user in (alice, bob, alice):  # the budget is the workspace's, whoever sends
        client.force_login(user)
        with django_capture_on_commit_callbacks(execute=True):
            for _ in range(2):
                r = post_json(
                    client, "/playground/send/", {"session": session(), "model": fake_models["local"].pk}
                )
                statuses.append(r.status_code)
    assert statuses == [202, 202, 202, 429, 429, 429]
    assert r.json()["error"]["code"] == "RATE_LIMITED" and int(r["Retry-After"]) >= 1
    assert Execution.objects.count() == 3
