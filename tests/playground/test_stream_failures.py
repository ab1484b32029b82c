"""A provider that misbehaves, through the official SDKs against the loopback fakes (issue 23, §3).

A stream cut before its final event is *incomplete* (``STREAM_CUT``): what arrived is shown and
stays out of the conversation unless the tester adopts it. A 200 that is not an event stream,
or an event that cannot be read, is ``PROVIDER_BAD_RESPONSE`` with a short excerpt. Usage the
provider did not report is unknown, never 0. Stop shuts the connection and the SDK's retries:
the fake counts no request after it. An answer that arrived before Stop took effect is billed
on the cancelled execution and in the run's ledger.
"""

from __future__ import annotations

import json
import threading
import time
from decimal import Decimal

import pytest
from django.tasks import TaskContext

from playground import compose as c
from playground import execute
from playground.models import Execution, ExecutionStatus
from runs.models import Event, Run
from tests.fakes.loopback import after_stop

MODELS = ["sonnet", "local"]  # Anthropic, OpenAI-compatible
PROMPT = "alpha beta gamma delta epsilon zeta eta theta iota kappa"
FULL = "Echo: " + PROMPT
RAW_NAMES = ("Error", "Exception", "Traceback", "AssertionError", "JSONDecodeError", "RemoteProtocolError")


def _fake(model, anthropic_fake, openai_fake):
    return anthropic_fake if model == "sonnet" else openai_fake


def _send(client, capture, model_pk, prompt=PROMPT, session=None) -> Execution:
    session = session or c.session_to_json(c.Session(prompt=prompt, mode="stateful"))
    with capture(execute=True):
        r = client.post(
            "/playground/send/",
            json.dumps({"session": session, "model": model_pk}),
            content_type="application/json",
        )
    assert r.status_code == 202, r.content
    return Execution.objects.get(pk=r.json()["executions"][0]["id"])


def _preview(client, session, change) -> dict:
    r = client.post(
        "/playground/preview/",
        json.dumps({"session": session, "change": change}),
        content_type="application/json",
    )
    assert r.status_code == 200, r.content
    return r.json()["session"]


def _message(client, ex) -> str:
    return client.get(f"/playground/executions/{ex.pk}/message/").content.decode()


def _bodies(run, event_type: str) -> list[dict]:
    return [
        json.loads(body)
        for body in Event.objects.filter(run=run, type=event_type)
        .order_by("seq")
        .values_list("body", flat=True)
    ]


def _no_exception_words(text: str) -> None:
    for name in RAW_NAMES:
        assert name not in text, f"{name!r} shown to the user: {text!r}"


# --------------------------------------------------------------------------------------------
# A cut stream is incomplete


@pytest.mark.django_db
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("how", ["cut", "cut_chunked"])
def test_a_cut_stream_is_incomplete_and_stays_out_of_the_history_unless_adopted(
    client, alice, fake_models, anthropic_fake, openai_fake, django_capture_on_commit_callbacks, model, how
):
    client.force_login(alice)
    _fake(model, anthropic_fake, openai_fake).script({"misbehave": how})
    ex = _send(client, django_capture_on_commit_callbacks, fake_models[model].pk)

    assert ex.status == ExecutionStatus.INCOMPLETE and ex.error_code == "STREAM_CUT"
    assert ex.response_text and FULL.startswith(ex.response_text) and len(ex.response_text) < len(FULL)
    assert "incomplete" in ex.error_message and "could not reach" not in ex.error_message
    _no_exception_words(ex.error_message)
    assert ex.usage == {} and ex.cost is None  # unknown, not 0
    run = Run.objects.get(run_id=ex.run_id)
    assert run.status == "failed"
    assert {e.get("code") for e in _bodies(run, "error")} == {"STREAM_CUT"}
    partial = [b for b in _bodies(run, "model_io") if b["direction"] == "response"]
    assert partial and partial[0]["payload"]["incomplete"] is True and "usage" not in partial[0]

    html = _message(client, ex)
    assert "Incomplete" in html and "STREAM_CUT" in html and ex.response_text.strip() in html
    assert 'data-action="adopt-partial"' in html and "Continue with this partial answer" in html
    assert "0.000000" not in html and 'data-meta="input"' not in html and "unknown" in html

    # Nobody adopted it: the next turn's history does not hold it.
    session = c.session_to_json(c.Session(prompt=PROMPT, mode="stateful"))
    after = _preview(client, session, {"name": "after_send", "value": str(ex.pk)})
    assert after["history"] == []
    # The tester adopts it: it joins as the assistant's turn, after the question.
    adopted = _preview(client, session, {"name": "adopt_partial", "value": str(ex.pk)})
    assert [m["role"] for m in adopted["history"]] == ["user", "assistant"]
    assert ex.response_text in json.dumps(adopted["history"][1])


@pytest.mark.django_db
def test_a_stream_that_ends_after_finish_reason_but_without_done_is_incomplete(
    client, alice, fake_models, openai_fake, django_capture_on_commit_callbacks
):
    """OpenAI's last event is ``data: [DONE]``: without it the usage chunk may be missing too."""
    from tests.fakes import openai_api

    client.force_login(alice)
    original = openai_api.FakeOpenAI._stream

    def without_done(self, completion, include_usage, delay):
        for frame in original(self, completion, include_usage, delay):
            if frame.startswith(b"data: [DONE]"):
                return
            yield frame

    openai_api.FakeOpenAI._stream = without_done
    try:
        ex = _send(client, django_capture_on_commit_callbacks, fake_models["local"].pk)
    finally:
        openai_api.FakeOpenAI._stream = original
    assert ex.status == "incomplete" and ex.error_code == "STREAM_CUT" and "[DONE]" in ex.error_message
    assert ex.response_text == FULL


# --------------------------------------------------------------------------------------------
# Unknown usage is unknown


@pytest.mark.django_db
def test_openai_without_usage_shows_unknown_usage_and_cost_never_zero(
    client, alice, fake_models, openai_fake, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    entry = fake_models["local"]
    entry.input_price, entry.output_price = Decimal("1"), Decimal("2")
    entry.save()
    openai_fake.script({"no_usage": True})
    ex = _send(client, django_capture_on_commit_callbacks, entry.pk)
    assert ex.status == "completed" and ex.response_text == FULL
    assert ex.usage == {} and ex.cost is None
    state = client.get(f"/playground/executions/{ex.pk}/").json()
    assert state["usage"] is None and state["cost"] is None
    html = _message(client, ex)
    assert "0 tokens" not in html and "0.000000" not in html
    assert "unknown (the provider did not report them)" in html
    final = [
        b for b in _bodies(Run.objects.get(run_id=ex.run_id), "model_io") if b["direction"] == "response"
    ]
    assert final and "usage" not in final[0] and "cost" not in final[0]


# --------------------------------------------------------------------------------------------
# A body that is not a stream, an event that cannot be read


@pytest.mark.django_db
@pytest.mark.parametrize("model", MODELS)
def test_an_html_200_is_a_bad_response_with_a_short_escaped_excerpt(
    client, alice, fake_models, anthropic_fake, openai_fake, django_capture_on_commit_callbacks, model
):
    client.force_login(alice)
    _fake(model, anthropic_fake, openai_fake).script({"misbehave": "html"})
    ex = _send(client, django_capture_on_commit_callbacks, fake_models[model].pk)
    assert ex.status == "failed" and ex.error_code == "PROVIDER_BAD_RESPONSE"
    assert "text/html" in ex.error_message and "Bad Gateway" in ex.error_message
    assert len(ex.error_message) < 300 and "upstream sent nothing" not in ex.error_message  # short
    _no_exception_words(ex.error_message)
    assert ex.response_text == "" and ex.content == ""
    html = _message(client, ex)
    assert "<script>" not in html and "&lt;script&gt;" in html  # escaped where it is shown
    assert "&lt;title&gt;502 Bad Gateway" in html
    assert "✓" not in html and "Completed" not in html
    session = c.session_to_json(c.Session(prompt=PROMPT, mode="stateful"))
    assert _preview(client, session, {"name": "after_send", "value": str(ex.pk)})["history"] == []
    assert _preview(client, session, {"name": "adopt_partial", "value": str(ex.pk)})["history"] == []


@pytest.mark.django_db
@pytest.mark.parametrize("model", MODELS)
def test_garbage_sse_is_a_bad_response_not_an_internal_error(
    client, alice, fake_models, anthropic_fake, openai_fake, django_capture_on_commit_callbacks, model
):
    client.force_login(alice)
    _fake(model, anthropic_fake, openai_fake).script({"misbehave": "garbage"})
    ex = _send(client, django_capture_on_commit_callbacks, fake_models[model].pk)
    assert ex.status == "failed" and ex.error_code == "PROVIDER_BAD_RESPONSE"
    assert "could not be read" in ex.error_message and "data: {" in ex.error_message
    _no_exception_words(ex.error_message)
    assert Run.objects.get(run_id=ex.run_id).status == "failed"


@pytest.mark.django_db
def test_an_unreachable_provider_says_so_in_words(
    client, alice, fake_models, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    provider = fake_models["openai"]
    provider.base_url = "http://127.0.0.1:9/v1"  # nothing listens on the discard port
    provider.save()
    ex = _send(client, django_capture_on_commit_callbacks, fake_models["local"].pk)
    assert ex.status == "failed" and ex.error_code == "PROVIDER_UNREACHABLE"
    assert ex.error_message.startswith("could not reach the provider")
    _no_exception_words(ex.error_message)


# --------------------------------------------------------------------------------------------
# Stop


def _wait_for(predicate, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.02)


def _submit(workspace, user, entry, prompt: str = PROMPT) -> Execution:
    comp = c.compose(c.Session(prompt=prompt), entry.spec())
    return execute.submit(workspace=workspace, user=user, entry=entry, composition=comp)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("model", MODELS)
def test_stop_before_the_first_byte_cancels_the_request_and_the_sdk_retries(
    workspace, alice, fake_models, anthropic_fake, openai_fake, settings, model, stored_tasks
):
    """The SDK would time out after 1 s and retry twice; after Stop, no request reaches the fake."""
    fake = _fake(model, anthropic_fake, openai_fake)
    provider = fake_models["anthropic" if model == "sonnet" else "openai"]
    provider.timeout_seconds, provider.max_retries = 1.0, 2
    provider.save()
    fake.script({"misbehave": "slow", "delay": 2.5})  # silent past the SDK's timeout
    ex = _submit(workspace, alice, fake_models[model])
    worker = threading.Thread(target=execute.process, args=(ex.pk, "test-worker"))
    worker.start()
    _wait_for(lambda: len(fake.server.received) == 1)
    time.sleep(0.2)  # the request is out; its answer is not
    ex.refresh_from_db()
    assert execute.cancel(ex, actor="user:alice") is True
    stopped_at = time.monotonic()
    worker.join(timeout=2)
    assert not worker.is_alive(), "the worker still waited for the provider after Stop"
    time.sleep(3.5)  # past the timeout and the SDK's back-off: a retry would have arrived by now
    assert after_stop(fake.server.received, stopped_at) == []
    assert len(fake.server.received) == 1

    ex.refresh_from_db()
    assert ex.status == "cancelled" and ex.error_code == "CANCELLED"
    assert Run.objects.get(run_id=ex.run_id).status == "cancelled"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("model", MODELS)
def test_stop_mid_stream_sends_nothing_more(
    workspace, alice, fake_models, anthropic_fake, openai_fake, settings, model, stored_tasks
):
    fake = _fake(model, anthropic_fake, openai_fake)
    provider = fake_models["anthropic" if model == "sonnet" else "openai"]
    provider.max_retries = 2
    provider.save()
    fake.chunk_delay = 0.05
    ex = _submit(workspace, alice, fake_models[model], " ".join(f"w{i}" for i in range(200)))
    worker = threading.Thread(target=execute.process, args=(ex.pk, "test-worker"))
    worker.start()
    _wait_for(lambda: len(Execution.objects.get(pk=ex.pk).partial_text) > 20)
    assert execute.cancel(Execution.objects.get(pk=ex.pk), actor="user:alice")
    stopped_at = time.monotonic()
    worker.join(timeout=2)
    assert not worker.is_alive()
    time.sleep(1.0)
    assert after_stop(fake.server.received, stopped_at) == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("model", MODELS)
def test_an_answer_that_arrives_after_stop_is_billed_on_the_cancelled_execution(
    workspace, alice, fake_models, anthropic_fake, openai_fake, settings, monkeypatch, model, stored_tasks
):
    """The whole answer arrived before the Stop took effect (the race a real provider wins):
    the tokens are billed, so the cancelled execution and its run's ledger show them."""
    entry = fake_models[model]
    entry.input_price, entry.output_price = Decimal("3"), Decimal("15")
    entry.save()
    ex = _submit(workspace, alice, entry)
    real_call = execute.providers.call
    stopper: list[threading.Thread] = []

    def call_then_stop(*args, **kwargs):
        result = real_call(*args, **kwargs)  # the answer is complete here
        # Stop, pressed by alice on the page, lands now (from the web request's thread).
        thread = threading.Thread(
            target=lambda: execute.cancel(Execution.objects.get(pk=ex.pk), actor="user:alice")
        )
        thread.start()
        stopper.append(thread)
        _wait_for(lambda: Execution.objects.get(pk=ex.pk).status == "cancelled")
        return result

    monkeypatch.setattr(execute.providers, "call", call_then_stop)
    execute.process(ex.pk, "test-worker")
    stopper[0].join(timeout=5)

    ex.refresh_from_db()
    assert ex.status == "cancelled" and ex.error_code == "CANCELLED"
    assert ex.usage["input_tokens"] > 0 and ex.usage["output_tokens"] > 0
    assert ex.cost is not None and ex.cost > 0 and ex.currency == "USD"
    run = Run.objects.get(run_id=ex.run_id)
    assert run.status == "cancelled"
    assert run.total_tokens == ex.usage["input_tokens"] + ex.usage["output_tokens"]
    assert Decimal(run.cost_totals["USD"]) == pytest.approx(ex.cost, rel=Decimal("1e-6"))
    types = list(Event.objects.filter(run=run).order_by("seq").values_list("type", flat=True))
    assert types[-1] == "run_status_changed" and types.count("model_io") >= 2


@pytest.mark.django_db(transaction=True)
def test_stop_pressed_in_another_process_stops_a_call_waiting_for_its_first_byte(
    workspace, alice, fake_models, anthropic_fake, monkeypatch, stored_tasks
):
    """The call runs in a worker process: Stop there is only the row saying cancelled. The task's
    stop watch sees it and shuts the connection; the SDK's retries never reach the fake."""
    provider = fake_models["anthropic"]
    provider.timeout_seconds, provider.max_retries = 1.0, 2
    provider.save()
    anthropic_fake.script({"misbehave": "slow", "delay": 2.5})  # silent: no chunk to flush between
    ex = _submit(workspace, alice, fake_models["sonnet"])
    (queued,) = stored_tasks.results
    worker = threading.Thread(
        target=execute.execution_task.call, args=(TaskContext(task_result=queued), str(ex.pk))
    )
    worker.start()
    _wait_for(lambda: len(anthropic_fake.server.received) == 1)
    # No in-process fast path: the Stop is pressed "elsewhere" and only its row tells.
    monkeypatch.setattr(execute, "signal_stop", lambda execution_id: False)
    assert execute.cancel(Execution.objects.get(pk=ex.pk), actor="user:alice") is True
    stopped_at = time.monotonic()
    worker.join(timeout=execute.STOP_WATCH_SECONDS + 2)
    assert not worker.is_alive(), "the call went on after Stop was pressed in another process"
    time.sleep(3.5)  # past the timeout and the SDK's back-off: a retry would have arrived by now
    assert after_stop(anthropic_fake.server.received, stopped_at) == []
    assert len(anthropic_fake.server.received) == 1
    ex.refresh_from_db()
    assert ex.status == "cancelled" and Run.objects.get(run_id=ex.run_id).status == "cancelled"
