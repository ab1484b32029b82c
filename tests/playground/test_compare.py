"""Compare: N columns that differ in model, prompt, system prompt or sampling; which answer joins
the history is said, and any completed one can be chosen."""

from __future__ import annotations

import json

import pytest

from playground import compose as c
from playground.models import Execution

pytestmark = pytest.mark.django_db


def _send(client, capture, body):
    with capture(execute=True):
        return client.post("/playground/send/", json.dumps(body), content_type="application/json")


def test_three_columns_differ_in_model_prompt_system_and_sampling(
    client, alice, fake_models, anthropic_fake, openai_fake, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    session = c.session_to_json(c.Session(prompt="Main question", system_prompt="Be brief."))
    r = _send(
        client,
        django_capture_on_commit_callbacks,
        {
            "session": session,
            "model": fake_models["sonnet"].pk,
            "compare": [
                {"model": fake_models["sonnet"].pk, "system_prompt": "Be thorough.", "temperature": 0.2},
                {
                    "model": fake_models["local"].pk,
                    "prompt": "Other question",
                    "top_p": 0.5,
                    "max_tokens": 300,
                },
            ],
        },
    )
    data = r.json()
    assert r.status_code == 202 and len(data["executions"]) == 3
    a, b, cc = (Execution.objects.get(pk=e["id"]) for e in data["executions"])
    assert data["joins_history"] == str(a.pk)
    assert [x.label for x in (a, b, cc)] == ["A · Fake Sonnet", "B · Fake Sonnet", "C · Fake local llama"]
    assert {x.compare_group for x in (a, b, cc)} == {data["compare_group"]}
    assert all(x.status == "completed" for x in (a, b, cc))
    first, second = anthropic_fake.requests[-2:]
    assert first["system"] == "Be brief." and "temperature" not in first
    assert second["system"] == "Be thorough." and second["temperature"] == 0.2
    wire = openai_fake.requests[-1]
    assert wire["messages"][-1] == {"role": "user", "content": "Other question"}
    assert wire["top_p"] == 0.5 and wire["max_tokens"] == 300
    assert cc.response_text == "Echo: Other question"

    # Choosing column C: its exchange (its own prompt) is what joins the history.
    r = client.post(
        "/playground/preview/",
        json.dumps({"session": session, "change": {"name": "after_send", "value": str(cc.pk)}}),
        content_type="application/json",
    )
    history = r.json()["session"]["history"]
    assert history == [
        {"role": "user", "content": "Other question"},
        {"role": "assistant", "content": [{"type": "text", "text": "Echo: Other question"}]},
    ]


@pytest.mark.parametrize(
    "compare,field",
    [
        ([{"temperature": 3}], "compare"),
        ([{"top_k": -1}], "compare"),
        ([{"colour": "red"}], "compare"),
        ([{}] * 5, "compare"),
        ("nope", "compare"),
        ([{"model": "x"}], "model"),
    ],
)
def test_bad_compare_columns_are_refused_and_nothing_is_sent(
    client, alice, fake_models, anthropic_fake, compare, field
):
    client.force_login(alice)
    body = {"session": c.session_to_json(c.Session(prompt="q")), "compare": compare}
    r = client.post("/playground/send/", json.dumps(body), content_type="application/json")
    assert r.status_code == 400 and r.json()["error"]["field"] == field
    assert Execution.objects.count() == 0 and anthropic_fake.requests == []
