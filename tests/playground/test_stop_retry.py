"""Stop (cancel a call mid-stream), Retry (the same request again) and the provider limits
(timeout, retries) that owners edit in settings."""

from __future__ import annotations

import json
import threading
import time

import pytest

from playground import compose as c
from playground import execute
from playground.models import Execution, ExecutionStatus, ProviderConfig
from runs.models import Event, Run

LONG = " ".join(f"word{i}" for i in range(150))


def _submit(workspace, user, entry, prompt: str) -> Execution:
    comp = c.compose(c.Session(prompt=prompt), entry.spec())
    return execute.submit(workspace=workspace, user=user, entry=entry, composition=comp)


def _wait_for(predicate, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.02)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("model", ["sonnet", "local"])
def test_stop_drops_the_provider_stream_and_records_a_cancelled_execution(
    workspace, alice, fake_models, anthropic_fake, openai_fake, settings, model, stored_tasks
):
    fake = anthropic_fake if model == "sonnet" else openai_fake
    fake.chunk_delay = 0.05  # 150 words: about 7.5 s if nobody stops it
    ex = _submit(workspace, alice, fake_models[model], LONG)
    worker = threading.Thread(target=execute.process, args=(ex.pk, "test-worker"))
    worker.start()
    _wait_for(lambda: len(Execution.objects.get(pk=ex.pk).partial_text) > 20)
    ex.refresh_from_db()
    assert execute.cancel(ex, actor="user:alice") is True
    worker.join(timeout=3)
    assert not worker.is_alive(), "the worker kept reading the provider's stream after Stop"

    ex.refresh_from_db()
    assert ex.status == ExecutionStatus.CANCELLED and ex.error_code == "CANCELLED"
    assert "Stopped by alice" in ex.error_message
    assert ex.response_text and len(ex.response_text) < len("Echo: " + LONG)
    run = Run.objects.get(run_id=ex.run_id)
    assert run.status == "cancelled"
    types = list(Event.objects.filter(run=run).order_by("seq").values_list("type", flat=True))
    assert "model_io" in types and types[-1] == "run_status_changed"
    # Stopping again (or a finished call) changes nothing.
    assert execute.cancel(ex, actor="user:alice") is False


@pytest.mark.django_db(transaction=True)
def test_stop_of_a_pending_execution_means_it_never_runs(
    workspace, alice, fake_models, anthropic_fake, settings, stored_tasks
):
    ex = _submit(workspace, alice, fake_models["sonnet"], "never sent")
    assert execute.cancel(ex, actor="user:alice")
    execute.process(ex.pk, "late-worker")
    ex.refresh_from_db()
    assert ex.status == "cancelled" and not ex.run_id
    assert anthropic_fake.requests == []


def _posting(capture):
    def _post(client, url, data=None):
        with capture(execute=True):
            return client.post(url, json.dumps(data or {}), content_type="application/json")

    return _post


@pytest.mark.django_db
def test_retry_sends_the_same_request_again_and_cancel_endpoint_roles(
    client, alice, bob, vera, charlie, fake_models, anthropic_fake, django_capture_on_commit_callbacks
):
    _post = _posting(django_capture_on_commit_callbacks)
    client.force_login(bob)
    session = c.session_to_json(c.Session(prompt="flaky [[error:529]] please"))
    r = _post(client, "/playground/send/", {"session": session, "model": fake_models["sonnet"].pk})
    failed = Execution.objects.get(pk=r.json()["executions"][0]["id"])
    assert failed.status == "failed" and failed.error_code == "OVERLOADED"
    html = client.get(f"/playground/executions/{failed.pk}/message/").content.decode()
    assert 'data-action="retry"' in html

    anthropic_fake.script({"text": "Fine now"})  # the next request succeeds
    r = _post(client, f"/playground/executions/{failed.pk}/retry/")
    assert r.status_code == 202 and r.json()["retry_of"] == str(failed.pk)
    again = Execution.objects.get(pk=r.json()["id"])
    assert again.status == "completed" and again.response_text == "Fine now"
    assert again.request == failed.request and again.user_content == failed.user_content
    assert anthropic_fake.requests[-1]["messages"] == anthropic_fake.requests[-2]["messages"]
    # A completed call is not retried; a finished one is not stopped.
    assert _post(client, f"/playground/executions/{again.pk}/retry/").status_code == 409
    r = _post(client, f"/playground/executions/{again.pk}/cancel/")
    assert r.status_code == 200 and r.json()["stopped"] is False and r.json()["status"] == "completed"

    client.force_login(vera)  # viewer: may look, may not stop or retry
    assert _post(client, f"/playground/executions/{failed.pk}/retry/").status_code == 403
    assert _post(client, f"/playground/executions/{failed.pk}/cancel/").status_code == 403
    client.force_login(charlie)  # outsider: the execution does not exist
    assert _post(client, f"/playground/executions/{failed.pk}/retry/").status_code == 404
    assert _post(client, f"/playground/executions/{failed.pk}/cancel/").status_code == 404


@pytest.mark.django_db
def test_owner_edits_timeout_and_retries_and_the_sdk_uses_them(
    client, alice, bob, fake_models, anthropic_fake, django_capture_on_commit_callbacks
):
    _post = _posting(django_capture_on_commit_callbacks)
    provider = fake_models["anthropic"]
    client.force_login(alice)
    r = client.post(
        "/playground/settings/",
        {"action": "limits", "provider": provider.pk, "timeout_seconds": "42.5", "max_retries": "1"},
    )
    assert r.status_code == 302
    provider.refresh_from_db()
    assert provider.timeout_seconds == 42.5 and provider.max_retries == 1
    assert provider.provider_settings().timeout == 42.5
    page = client.get("/playground/settings/").content.decode()
    assert 'name="timeout_seconds" value="42.5"' in page

    # One retry allowed: a 429 followed by success answers (two requests on the wire).
    anthropic_fake.script({"error": (429, None, "slow down")})
    client.force_login(bob)
    session = c.session_to_json(c.Session(prompt="hello"))
    r = _post(client, "/playground/send/", {"session": session, "model": fake_models["sonnet"].pk})
    ex = Execution.objects.get(pk=r.json()["executions"][0]["id"])
    assert ex.status == "completed" and len(anthropic_fake.requests) == 2

    client.force_login(alice)
    for bad in ({"timeout_seconds": "0", "max_retries": "1"}, {"timeout_seconds": "10", "max_retries": "x"}):
        r = client.post(
            "/playground/settings/", {"action": "limits", "provider": provider.pk, **bad}, follow=True
        )
        assert "must be" in r.content.decode()
    provider.refresh_from_db()
    assert provider.timeout_seconds == 42.5 and provider.max_retries == 1
    client.force_login(bob)  # not an owner
    r = client.post(
        "/playground/settings/", {"action": "limits", "provider": provider.pk, "timeout_seconds": "5"}
    )
    assert r.status_code in (403, 404)
    assert ProviderConfig.objects.get(pk=provider.pk).timeout_seconds == 42.5
