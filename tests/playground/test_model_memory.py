"""The chosen model is remembered per user (and workspace); a recorded call whose model is not
configured here reopens with a visible notice instead of silently switching models."""

from __future__ import annotations

import json

import pytest

from playground import compose as c
from playground.models import Execution

pytestmark = pytest.mark.django_db


def _initial(client) -> dict:
    html = client.get("/playground/").content.decode()
    start = html.index('<script id="pg-initial" type="application/json">') + len(
        '<script id="pg-initial" type="application/json">'
    )
    return json.loads(html[start : html.index("</script>", start)])


def test_last_model_is_remembered_per_user_and_a_missing_model_is_announced(
    client, alice, bob, fake_models, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    assert _initial(client)["model"] is None  # nothing remembered: the workspace default applies
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(
            "/playground/send/",
            json.dumps(
                {"session": c.session_to_json(c.Session(prompt="hi")), "model": fake_models["local"].pk}
            ),
            content_type="application/json",
        )
    initial = _initial(client)
    assert initial["model"] == fake_models["local"].pk and initial["model_source"] == "remembered"
    client.force_login(bob)
    assert _initial(client)["model"] is None  # bob's choice is his own

    # The model of a recorded call is no longer configured: reopen with a notice.
    ex = Execution.objects.get(pk=r.json()["executions"][0]["id"])
    fake_models["local"].model_id = "renamed-model"
    fake_models["local"].save()
    html = client.get(f"/playground/?from_event={ex.run_id}:2").content.decode()
    assert "llama-local (OpenAI), which is not configured in this workspace" in html
    # the recorded provider still has a model here: it is preferred to the (Anthropic) default
    assert "Fake local llama (renamed-model, OpenAI) is selected instead (same provider" in html
    # A removed model is not remembered any more.
    client.force_login(alice)
    fake_models["local"].delete()
    assert _initial(client)["model"] is None
