"""Playground pages and JSON endpoints: roles, outsiders, no-provider message, preview, send,
open-in-playground from a run's model_io event, settings (keys encrypted, never shown)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from channels.testing import WebsocketCommunicator

from playground import compose as c
from playground.models import Execution, ModelEntry, ProviderConfig

pytestmark = pytest.mark.django_db


def post_json(client, url, data):
    return client.post(url, json.dumps(data), content_type="application/json")


def base_session(**kw):
    return c.session_to_json(c.Session(**kw))


def test_page_says_exactly_what_to_configure_without_a_provider(client, alice, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client.force_login(alice)
    html = client.get("/playground/").content.decode()
    assert "Nothing can answer yet" in html
    assert "Anthropic has no key: the operator of this server has not configured one" in html
    assert "OpenAI has no key" in html
    assert "ANTHROPIC_API_KEY" not in html  # which variables the server reads is not told
    assert 'id="send" disabled' in html
    r = post_json(client, "/playground/send/", {"session": base_session(prompt="hi")})
    assert r.status_code == 409 and "has no key" in r.json()["error"]["message"]
    assert Execution.objects.count() == 0


def test_environment_key_makes_the_global_provider_usable(client, alice, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env-123")
    client.force_login(alice)
    html = client.get("/playground/").content.decode()
    assert "Nothing can answer yet" not in html
    assert "sk-ant-from-env-123" not in html


def test_preview_applies_smart_behaviours_and_returns_the_exact_request(client, alice, fake_models):
    client.force_login(alice)
    r = post_json(
        client,
        "/playground/preview/",
        {
            "session": base_session(prompt="hi", system_prompt="sys"),
            "model": fake_models["sonnet"].pk,
            "change": {"name": "thinking", "value": True},
        },
    )
    data = r.json()
    assert data["session"]["thinking"] is True and data["session"]["advanced"]["max_tokens"] == 16000
    assert data["request"]["thinking"] == {"type": "enabled", "budget_tokens": 10000}
    assert data["request"]["system"] == "sys"
    bad = post_json(client, "/playground/preview/", {"session": {"mode": "nope"}})
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "mode"


def test_send_runs_and_records_and_after_send_moves_history(
    client, alice, fake_models, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    session = base_session(prompt="Hello", create_cache=True, system_prompt="Be brief.")
    with django_capture_on_commit_callbacks(execute=True):
        r = post_json(client, "/playground/send/", {"session": session, "model": fake_models["sonnet"].pk})
    assert r.status_code == 202
    ex = r.json()["executions"][0]
    state = client.get(f"/playground/executions/{ex['id']}/").json()
    assert state["status"] == "completed" and state["partial_text"] == "Echo: Hello"
    assert state["context"]["window"] == 200_000 and state["context"]["used"] > 0
    html = client.get(f"/playground/executions/{ex['id']}/message/").content.decode()
    assert "Echo: Hello" in html and "Cache write" in html
    after = post_json(
        client,
        "/playground/preview/",
        {
            "session": session,
            "model": fake_models["sonnet"].pk,
            "change": {"name": "after_send", "value": ex["id"]},
        },
    ).json()["session"]
    assert after["create_cache"] is False
    assert after["history"] == [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": [{"type": "text", "text": "Echo: Hello"}]},
    ]
    assert len(after["cached"]) == 1


def test_compare_sends_the_same_composition_to_two_models(
    client, alice, fake_models, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        r = post_json(
            client,
            "/playground/send/",
            {
                "session": base_session(prompt="Same question"),
                "model": fake_models["sonnet"].pk,
                "compare_model": fake_models["local"].pk,
            },
        )
    data = r.json()
    assert data["compare_group"] and len(data["executions"]) == 2
    kinds = {e["provider"] for e in data["executions"]}
    assert kinds == {"anthropic", "openai"}
    for e in data["executions"]:
        assert Execution.objects.get(pk=e["id"]).status == "completed"


def test_viewer_cannot_send_and_outsider_cannot_see_an_execution(
    client, alice, vera, charlie, fake_models, django_capture_on_commit_callbacks
):
    client.force_login(vera)
    r = post_json(client, "/playground/send/", {"session": base_session(prompt="hi")})
    assert r.status_code == 403
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        ex = post_json(client, "/playground/send/", {"session": base_session(prompt="hi")}).json()[
            "executions"
        ][0]
    client.force_login(charlie)
    assert client.get(f"/playground/executions/{ex['id']}/").status_code == 404
    assert client.get(f"/playground/executions/{ex['id']}/message/").status_code == 404
    assert client.get(f"/playground/?from_event={ex['run_id']}:2").status_code == 404
    r = post_json(
        client, "/playground/send/", {"session": base_session(prompt="hi"), "model": fake_models["sonnet"].pk}
    )
    assert r.status_code == 409  # another workspace's model is not available


def test_open_in_playground_restores_the_exact_request(
    client, alice, fake_models, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    s = c.set_thinking(
        c.Session(
            prompt="What are the terms?",
            system_prompt="Lawyer",
            document=c.Document("c.txt", "text/plain", "Net 30."),
            create_cache=True,
            citations=True,
            operation_type="validation",
        ),
        True,
    )
    with django_capture_on_commit_callbacks(execute=True):
        ex = post_json(
            client, "/playground/send/", {"session": c.session_to_json(s), "model": fake_models["sonnet"].pk}
        ).json()["executions"][0]
    execution = Execution.objects.get(pk=ex["id"])
    html = client.get(f"/playground/?from_event={execution.run_id}:2").content.decode()
    start = html.index('id="pg-initial" type="application/json">') + len(
        'id="pg-initial" type="application/json">'
    )
    initial = json.loads(html[start : html.index("</script>", start)])
    restored = c.session_from_json(initial["session"])
    assert (
        c.compose(restored, fake_models["sonnet"].spec(), _schema("validation")).request
        == execution.request_json
    )
    assert initial["model"] == fake_models["sonnet"].pk
    assert initial["origin"]["restore"]["status"] == "exact"  # said only when it recomposes identically
    assert "model_notice" not in initial["origin"]
    assert initial["origin"]["response"]["usage"]["inputTokens"] > 0
    # the response event (any seq of the call) leads to the same request
    from runs.models import Event

    response_seq = Event.objects.get(
        run__run_id=execution.run_id, type="model_io", body__contains='"direction":"response"'
    ).seq
    html2 = client.get(f"/playground/?from_event={execution.run_id}:{response_seq}").content.decode()
    assert "Opened from a run" in html2
    assert client.get(f"/playground/?from_event={execution.run_id}:1").status_code == 404  # step_started
    assert client.get("/playground/?from_event=nonsense").status_code == 404


def _schema(op):
    from playground import operations

    return operations.get(op).schema


def test_settings_store_keys_encrypted_and_never_show_them(client, alice, bob, workspace):
    client.force_login(bob)
    r = client.post("/playground/settings/", {"action": "add_provider", "name": "X", "kind": "anthropic"})
    assert r.status_code == 403
    client.force_login(alice)
    client.post(
        "/playground/settings/",
        {
            "action": "add_provider",
            "name": "Mine",
            "kind": "openai",
            "base_url": "http://127.0.0.1:11434/v1",
            "api_key": "sk-very-secret-9876",
            "key_required": "on",
        },
    )
    provider = ProviderConfig.objects.get(workspace=workspace, name="Mine")
    assert "sk-very-secret-9876" not in provider.api_key_encrypted
    assert provider.api_key() == "sk-very-secret-9876"
    page = client.get("/playground/settings/").content.decode()
    assert "sk-very-secret-9876" not in page and "…9876" in page
    client.post(
        "/playground/settings/",
        {"action": "add_model", "provider": provider.pk, "model_id": "llama3.2", "context_window": "8192"},
    )
    entry = ModelEntry.objects.get(workspace=workspace, model_id="llama3.2")
    assert entry.input_price is None
    client.post(
        "/playground/settings/",
        {
            "action": "prices",
            f"m{entry.pk}_input": "0.5",
            f"m{entry.pk}_output": "",
            f"m{entry.pk}_cache_read": "",
            f"m{entry.pk}_cache_write": "",
            f"m{entry.pk}_cache_write_1h": "1.5",
            f"m{entry.pk}_currency": "eur",
        },
    )
    entry.refresh_from_db()
    assert str(entry.input_price) == "0.500000" and entry.output_price is None and entry.currency == "EUR"
    # a 1 h cache-write price of its own (Anthropic's 1 h cache writes), in the price book
    assert str(entry.cache_write_1h_price) == "1.500000" and entry.cache_write_price is None
    assert entry.price().cache_write_1h == Decimal("1.5")
    assert (
        f'name="m{entry.pk}_cache_write_1h" value="1.500000"'
        in client.get("/playground/settings/").content.decode()
    )
    assert "sk-very-secret-9876" not in client.get("/playground/").content.decode()


def test_saved_prompt_round_trip(client, alice, fake_models):
    client.force_login(alice)
    session = c.session_to_json(
        c.set_thinking(c.Session(prompt="Rate it", system_prompt="Judge", operation_type="rating"), True)
    )
    r = post_json(
        client,
        "/playground/prompts/",
        {"session": session, "model": fake_models["sonnet"].pk, "name": "Rater"},
    )
    url = r.json()["url"]
    html = client.get(url).content.decode()
    start = html.index('id="pg-initial" type="application/json">') + len(
        'id="pg-initial" type="application/json">'
    )
    initial = json.loads(html[start : html.index("</script>", start)])
    assert initial["session"]["operation_type"] == "rating" and initial["session"]["thinking"] is True
    assert initial["session"]["system_prompt"] == "Judge" and initial["model"] == fake_models["sonnet"].pk


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_websocket_streams_an_execution_to_its_end(alice_async_setup):
    from workbench.asgi import application

    user, execution_id, other = alice_async_setup
    comm = WebsocketCommunicator(
        application, f"/ws/playground/executions/{execution_id}/", headers=[(b"origin", b"http://127.0.0.1")]
    )
    comm.scope["user"] = user
    connected, _ = await comm.connect()
    assert connected
    seen = []
    while True:
        msg = await comm.receive_json_from(timeout=5)
        seen.append(msg)
        if msg["type"] == "done":
            break
    await comm.disconnect()
    text = "".join(m["text"] for m in seen if m["type"] == "delta" and m["kind"] == "text")
    assert text == "Echo: streamed"
    assert seen[-1]["state"]["status"] == "completed" and "Echo: streamed" in seen[-1]["html"]
    outsider = WebsocketCommunicator(
        application, f"/ws/playground/executions/{execution_id}/", headers=[(b"origin", b"http://127.0.0.1")]
    )
    outsider.scope["user"] = other
    connected, code = await outsider.connect()
    assert not connected
    await outsider.disconnect()


@pytest.fixture
def alice_async_setup(transactional_db, django_user_model, settings, anthropic_fake, immediate_tasks):
    from playground import execute
    from runs.actions.workspaces import add_member
    from runs.models import Workspace

    ws = Workspace.objects.create(slug="ws-live", name="Live")
    other_ws = Workspace.objects.create(slug="ws-other", name="Other")
    user = django_user_model.objects.create_user(username="liz", password="pw-123456789")
    other = django_user_model.objects.create_user(username="otto", password="pw-123456789")
    add_member(ws, user, "owner")
    add_member(other_ws, other, "owner")
    provider = ProviderConfig(
        workspace=ws, name="Fake", kind="anthropic", base_url=anthropic_fake.url, max_retries=0
    )
    provider.set_api_key("test-anthropic-key")
    provider.save()
    entry = ModelEntry.objects.create(
        workspace=ws, provider=provider, model_id="claude-sonnet-4-6", display_name="S", context_window=1000
    )
    ex = execute.submit(
        workspace=ws,
        user=user,
        entry=entry,
        composition=c.compose(c.Session(prompt="streamed"), entry.spec()),
    )
    return user, ex.pk, other
