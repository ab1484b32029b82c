"""Owners edit, disable and delete the workspace's providers and models, and hide global models;
every refusal has a code and changes nothing; members cannot."""

from __future__ import annotations

import pytest

from playground import config
from playground.models import ModelEntry, ProviderConfig

pytestmark = pytest.mark.django_db


def _post(client, **data):
    return client.post("/playground/settings/", data, follow=True)


def test_edit_disable_enable_delete_provider_and_models(client, alice, bob, workspace, fake_models):
    client.force_login(alice)
    anth, sonnet = fake_models["anthropic"], fake_models["sonnet"]
    r = _post(client, action="edit_provider", provider=anth.pk, name="Renamed", base_url=anth.base_url)
    assert r.status_code == 200
    anth.refresh_from_db()
    assert anth.name == "Renamed" and not anth.key_required
    assert _post(client, action="edit_provider", provider=anth.pk, name="Fake OpenAI").status_code == 400
    anth.refresh_from_db()
    assert anth.name == "Renamed"

    _post(client, action="disable_provider", provider=anth.pk)
    assert sonnet.pk not in {m.pk for m in config.available_models(workspace)}
    _post(client, action="enable_provider", provider=anth.pk)
    assert sonnet.pk in {m.pk for m in config.available_models(workspace)}

    r = _post(
        client,
        action="edit_model",
        model=sonnet.pk,
        model_id="claude-opus-4-1",
        display_name="Opus",
        context_window="300000",
        supports_thinking="on",
        max_tokens_param="max_tokens",
    )
    assert r.status_code == 200
    sonnet.refresh_from_db()
    assert (sonnet.model_id, sonnet.display_name, sonnet.context_window) == (
        "claude-opus-4-1",
        "Opus",
        300000,
    )
    assert not sonnet.supports_pdf
    assert _post(client, action="edit_model", model=sonnet.pk, model_id="").status_code == 400
    _post(client, action="disable_model", model=sonnet.pk)
    assert sonnet.pk not in {m.pk for m in config.available_models(workspace)}
    _post(client, action="enable_model", model=sonnet.pk)
    _post(client, action="delete_model", model=sonnet.pk)
    assert not ModelEntry.objects.filter(pk=sonnet.pk).exists()

    _post(client, action="delete_provider", provider=anth.pk)
    assert not ProviderConfig.objects.filter(pk=anth.pk).exists()
    page = client.get("/playground/settings/").content.decode()
    assert "Renamed" not in page

    client.force_login(bob)  # a reviewer cannot manage
    r = client.post(
        "/playground/settings/", {"action": "delete_provider", "provider": fake_models["openai"].pk}
    )
    assert r.status_code in (403, 404)
    assert ProviderConfig.objects.filter(pk=fake_models["openai"].pk).exists()


def test_global_models_are_hidden_not_changed(client, alice, workspace, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-123456")
    client.force_login(alice)
    global_model = ModelEntry.objects.filter(workspace__isnull=True).first()
    assert global_model is not None
    r = _post(client, action="edit_model", model=global_model.pk, model_id="x")
    assert r.status_code == 400 and "GLOBAL_MODEL" in r.content.decode()
    r = _post(client, action="delete_model", model=global_model.pk)
    assert r.status_code == 400 and ModelEntry.objects.filter(pk=global_model.pk).exists()
    _post(client, action="disable_model", model=global_model.pk)
    assert global_model.pk not in {m.pk for m in config.available_models(workspace)}
    assert "hidden here" in client.get("/playground/settings/").content.decode()
    _post(client, action="enable_model", model=global_model.pk)
    assert global_model.pk in {m.pk for m in config.available_models(workspace)}
    global_provider = global_model.provider
    r = _post(client, action="delete_provider", provider=global_provider.pk)
    assert r.status_code == 400 and ProviderConfig.objects.filter(pk=global_provider.pk).exists()
