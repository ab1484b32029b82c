"""Playground runs can be found: titled by their prompt, found by prompt and answer text, and the
turns of one conversation are linked (a shared tag, and each turn's parent is the previous one)."""

from __future__ import annotations

import json

import pytest

from playground import compose as c
from playground.execute import run_title
from playground.models import Execution
from runs.models import Run, RunParent

pytestmark = pytest.mark.django_db


def _post(client, capture, url, body):
    with capture(execute=True):
        return client.post(url, json.dumps(body), content_type="application/json")


def test_run_title_from_the_prompt():
    assert run_title("What are the payment terms?") == "Playground · What are the payment terms?"
    assert run_title([{"type": "document"}, {"type": "text", "text": "Line one\nline   two"}]) == (
        "Playground · Line one line two"
    )
    long = run_title("x" * 300)
    assert len(long) == len("Playground · ") + 80 and long.endswith("…")
    assert run_title("") == "Playground"


def test_turns_are_linked_titled_and_searchable(
    client, alice, charlie, fake_models, anthropic_fake, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    cap = django_capture_on_commit_callbacks
    session = c.session_to_json(c.Session(prompt="Where is the unicorn clause?"))
    first = _post(client, cap, "/playground/send/", {"session": session, "model": fake_models["sonnet"].pk})
    conversation = first.json()["conversation"]
    ex1 = Execution.objects.get(pk=first.json()["executions"][0]["id"])
    assert len(conversation) == 32 and ex1.conversation_id == conversation
    r = client.post(
        "/playground/preview/",
        json.dumps({"session": session, "change": {"name": "after_send", "value": str(ex1.pk)}}),
        content_type="application/json",
    )
    session = dict(r.json()["session"], prompt="And the zebra penalty?")
    anthropic_fake.script({"text": "The zebra penalty is 5 percent."})
    second = _post(
        client,
        cap,
        "/playground/send/",
        {
            "session": session,
            "model": fake_models["sonnet"].pk,
            "conversation": {"id": conversation, "parent": str(ex1.pk)},
        },
    )
    assert second.json()["conversation"] == conversation
    ex2 = Execution.objects.get(pk=second.json()["executions"][0]["id"])
    run1, run2 = Run.objects.get(run_id=ex1.run_id), Run.objects.get(run_id=ex2.run_id)
    assert run1.title == "Playground · Where is the unicorn clause?"
    assert run2.title == "Playground · And the zebra penalty?"
    assert f"conversation:{conversation}" in run1.tags and f"conversation:{conversation}" in run2.tags
    assert list(RunParent.objects.filter(child=run2).values_list("parent_run_id", flat=True)) == [run1.run_id]
    assert run2.run_doc["context"] == {"parentRunId": run1.run_id}

    listing = client.get(f"/runs/?tag=conversation:{conversation}").content.decode()
    assert run1.run_id in listing and run2.run_id in listing
    by_prompt = client.get("/runs/?q=unicorn").content.decode()
    assert run1.run_id in by_prompt and run2.run_id in by_prompt  # the second turn carries the first
    by_answer = client.get("/runs/?q=5 percent").content.decode()
    assert run2.run_id in by_answer and run1.run_id not in by_answer
    message = client.get(f"/playground/executions/{ex2.pk}/message/").content.decode()
    assert f"/runs/?tag=conversation:{conversation}" in message

    # Stateless sends stand alone; a parent from another workspace or a bad id is refused.
    lone = _post(
        client,
        cap,
        "/playground/send/",
        {"session": c.session_to_json(c.Session(prompt="alone", mode="stateless"))},
    )
    assert lone.json()["conversation"] is None
    assert (
        Run.objects.get(
            run_id=Execution.objects.get(pk=lone.json()["executions"][0]["id"]).run_id
        ).run_doc.get("context")
        is None
    )
    bad = _post(client, cap, "/playground/send/", {"session": session, "conversation": {"id": "../x"}})
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "conversation"
    client.force_login(charlie)
    assert run1.run_id not in client.get("/runs/?q=unicorn").content.decode()
