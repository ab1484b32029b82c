"""Execution lifecycle, run recording, failure codes and crash recovery."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest
from django.tasks import TaskContext

from playground import compose as c
from playground import execute, operations
from playground.models import Execution, ExecutionStatus, ModelEntry
from runs.models import Event, Run
from runs.protocol.validate import validate_event
from runs.providers.redact import redact

pytestmark = pytest.mark.django_db


def send(workspace, user, entry: ModelEntry, session: c.Session, capture) -> Execution:
    op = session.operation_type
    comp = c.compose(session, entry.spec(), operations.get(op).schema if op != "generic" else None)
    with capture(execute=True):
        ex = execute.submit(workspace=workspace, user=user, entry=entry, composition=comp)
    ex.refresh_from_db()
    return ex


def events(run_id: str) -> list[dict]:
    return [e.data for e in Event.objects.filter(run__run_id=run_id).order_by("seq")]


def test_a_send_completes_and_is_recorded_as_a_run(
    workspace, alice, fake_models, django_capture_on_commit_callbacks
):
    s = c.set_thinking(
        c.Session(
            prompt="What are the payment terms?",
            system_prompt="You are a lawyer.",
            document=c.Document("c.txt", "text/plain", "Payment is due in 30 days. " * 30),
            create_cache=True,
            citations=True,
        ),
        True,
    )
    ex = send(workspace, alice, fake_models["sonnet"], s, django_capture_on_commit_callbacks)
    assert ex.status == ExecutionStatus.COMPLETED, ex.error_message
    assert ex.response_text.endswith("What are the payment terms?")
    assert ex.thinking and ex.citations
    assert ex.usage["cache_write_tokens"] > 0 and ex.usage["reasoning_tokens"] > 0
    assert ex.cost is not None and ex.cost > 0 and ex.currency == "USD"
    run = Run.objects.get(run_id=ex.run_id)
    assert run.workspace == workspace and run.status == "completed" and run.workflow_id == "playground"
    evs = events(run.run_id)
    for e in evs:
        validate_event(e, "event")
    kinds = [(e["type"], e.get("direction")) for e in evs]
    assert kinds[0] == ("step_started", None) and kinds[1] == ("model_io", "request")
    assert ("model_io", "stream_chunk") in kinds and ("model_io", "response") in kinds
    assert kinds[-2:] == [("step_completed", None), ("run_status_changed", None)]
    model_io = [e for e in evs if e["type"] == "model_io"]
    assert len({e["correlationId"] for e in model_io}) == 1
    request = model_io[0]["payload"]
    assert request["stream"] is True and request["thinking"]["type"] == "enabled"
    assert request["system"][0]["cache_control"] == {"type": "ephemeral"}
    chunks = [e["payload"] for e in model_io if e["direction"] == "stream_chunk"]
    assert "".join(p["text"] for p in chunks if p["kind"] == "text") == ex.response_text
    assert "".join(p["text"] for p in chunks if p["kind"] == "thinking") == ex.thinking
    response = model_io[-1]
    assert response["usage"]["cachedInputTokens"] == 0
    assert response["usage"]["reasoningTokens"] == ex.usage["reasoning_tokens"]
    assert response["usage"]["inputTokens"] == ex.usage["input_tokens"]
    assert Decimal(str(response["cost"]["amount"])) == ex.cost.normalize() or abs(
        Decimal(str(response["cost"]["amount"])) - ex.cost
    ) < Decimal("1e-9")
    answer = [e for e in evs if e["type"] == "artifact_written"][0]["artifact"]
    assert answer["typeId"] == "playground.generic" and answer["data"] == {"text": ex.response_text}
    assert run.model_calls == 1 and run.total_tokens > 0


def test_the_follow_up_reads_the_cache(workspace, alice, fake_models, django_capture_on_commit_callbacks):
    entry = fake_models["sonnet"]
    s = c.Session(
        prompt="Terms?",
        system_prompt="Lawyer. " * 50,
        document=c.Document("c.txt", "text/plain", "x " * 800),
        create_cache=True,
    )
    comp1 = c.compose(s, entry.spec())
    ex1 = send(workspace, alice, entry, s, django_capture_on_commit_callbacks)
    s2 = replace(c.after_send(s, comp1, ex1.content_json), prompt="Liability?", send_file=False)
    ex2 = send(workspace, alice, entry, s2, django_capture_on_commit_callbacks)
    assert ex2.usage["cache_read_tokens"] == ex1.usage["cache_write_tokens"] > 0
    assert ex2.usage["cache_write_tokens"] == 0
    assert ex2.cost < ex1.cost
    cached = events(ex2.run_id)
    response = [e for e in cached if e.get("direction") == "response"][0]
    assert response["usage"]["cachedInputTokens"] == ex1.usage["cache_write_tokens"]


def test_structured_answer_is_stored_and_tool_calls_recorded(
    workspace, alice, fake_models, django_capture_on_commit_callbacks
):
    ex = send(
        workspace,
        alice,
        fake_models["sonnet"],
        c.Session(prompt="Is it valid?", operation_type="validation"),
        django_capture_on_commit_callbacks,
    )
    assert ex.status == "completed"
    assert ex.structured_output == {"result": True, "comment": "Checked: Is it valid?"}
    assert not ex.tool_calls  # the output tool is not a tool call of the user's
    tool = c.Tool("get_weather", "w", {"type": "object", "properties": {"city": {"type": "string"}}})
    ex2 = send(
        workspace,
        alice,
        fake_models["sonnet"],
        c.Session(prompt="use get_weather now", tool_use=True, tools=(tool,)),
        django_capture_on_commit_callbacks,
    )
    assert ex2.tool_calls[0]["name"] == "get_weather"
    calls = [e for e in events(ex2.run_id) if e["type"] == "tool_call"]
    assert calls and calls[0]["name"] == "get_weather" and calls[0]["args"] == {"city": "city example"}


def test_invalid_structured_output_fails_with_a_code(
    workspace, alice, fake_models, anthropic_fake, django_capture_on_commit_callbacks
):
    anthropic_fake.script({"tool": "record_rating", "input": {"score": 3}})
    ex = send(
        workspace,
        alice,
        fake_models["sonnet"],
        c.Session(prompt="Rate", operation_type="rating"),
        django_capture_on_commit_callbacks,
    )
    assert ex.status == "failed" and ex.error_code == "STRUCTURED_OUTPUT_INVALID"
    assert "rationale" in ex.error_message
    assert Run.objects.get(run_id=ex.run_id).status == "failed"


@pytest.mark.parametrize(
    "status,code", [(429, "RATE_LIMITED"), (529, "OVERLOADED"), (401, "AUTHENTICATION_FAILED")]
)
def test_provider_failures_end_failed_with_code_and_message(
    workspace, alice, fake_models, anthropic_fake, django_capture_on_commit_callbacks, status, code
):
    anthropic_fake.script({"error": (status, None, f"provider says {status}")})
    ex = send(
        workspace, alice, fake_models["sonnet"], c.Session(prompt="hi"), django_capture_on_commit_callbacks
    )
    assert ex.status == "failed" and ex.error_code == code and ex.error_message == f"provider says {status}"
    assert ex.error_status == status
    run = Run.objects.get(run_id=ex.run_id)
    assert run.status == "failed"
    err = [e for e in events(run.run_id) if e["type"] == "error"][0]
    assert err["code"] == code


def test_openai_compatible_execution_and_secret_redaction(
    workspace, alice, fake_models, openai_fake, django_capture_on_commit_callbacks
):
    ex = send(
        workspace,
        alice,
        fake_models["local"],
        c.Session(prompt="my key is test-openai-key"),
        django_capture_on_commit_callbacks,
    )
    assert ex.status == "completed" and ex.provider_kind == "openai"
    request = [e for e in events(ex.run_id) if e.get("direction") == "request"][0]["payload"]
    assert "test-openai-key" not in str(request) and "[redacted]" in str(request)
    assert ex.cost is None  # no price in the table: unknown, not zero
    response = [e for e in events(ex.run_id) if e.get("direction") == "response"][0]
    assert "cost" not in response


def test_redact_blanks_secret_fields_but_not_token_counts():
    data = {
        "max_tokens": 10,
        "headers": {"Authorization": "Bearer x", "x-api-key": "abc"},
        "text": "key sk-secret-123",
    }
    assert redact(data, ("sk-secret-123",)) == {
        "max_tokens": 10,
        "headers": {"Authorization": "[redacted]", "x-api-key": "[redacted]"},
        "text": "key [redacted]",
    }


def test_missing_key_fails_with_no_provider(
    workspace, alice, fake_models, django_capture_on_commit_callbacks
):
    provider = fake_models["anthropic"]
    provider.set_api_key("")
    provider.save()
    ex = send(
        workspace, alice, fake_models["sonnet"], c.Session(prompt="hi"), django_capture_on_commit_callbacks
    )
    assert ex.status == "failed" and ex.error_code == "NO_PROVIDER"
    assert "needs an API key" in ex.error_message
    assert ex.run_id == ""


def _submit(workspace, user, entry, prompt="hi"):
    return execute.submit(
        workspace=workspace,
        user=user,
        entry=entry,
        composition=c.compose(c.Session(prompt=prompt), entry.spec()),
    )


def _run_task(task_result, execution_id) -> str:
    """What a worker does with the task row: call the task with its context."""
    return execute.execution_task.call(TaskContext(task_result=task_result), str(execution_id))


def test_the_task_is_enqueued_on_commit_and_a_second_task_row_does_nothing(
    workspace, alice, fake_models, anthropic_fake, stored_tasks, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        ex = _submit(workspace, alice, fake_models["sonnet"])
    assert stored_tasks.results == []  # nothing before the commit
    for callback in callbacks:
        callback()
    assert Execution.objects.get(pk=ex.pk).status == "pending"  # the web process only stores
    (first,) = stored_tasks.results
    assert first.task.module_path == "playground.execute.execution_task" and first.args == [str(ex.pk)]
    second = execute.execution_task.enqueue(str(ex.pk))  # e.g. enqueued twice by mistake
    assert _run_task(first, ex.pk) == "completed"
    assert _run_task(second, ex.pk) == "completed"  # claimed by the first row: nothing done
    assert len(anthropic_fake.requests) == 1
    assert Execution.objects.get(pk=ex.pk).worker_id == f"task:{first.id}"


def test_a_task_run_again_after_its_worker_died_mid_call_never_calls_the_provider_again(
    workspace, alice, fake_models, anthropic_fake, stored_tasks
):
    ex = _submit(workspace, alice, fake_models["sonnet"])
    result = execute.execution_task.enqueue(str(ex.pk))
    claim = f"task:{result.id}"
    # The worker claimed it, started the run (the request is recorded), then died mid-stream.
    assert execute.claim(ex.pk, claim)
    ex.refresh_from_db()
    run_id = execute.RunRecorder(ex).start({"model": "m"}, ())
    Execution.objects.filter(pk=ex.pk).update(run_id=run_id, partial_text="half an ans")
    # Its lease expired: the same task row runs again.
    assert _run_task(result, ex.pk) == "failed"
    ex.refresh_from_db()
    assert ex.error_code == "EXECUTION_INTERRUPTED" and ex.response_text == "half an ans"
    assert "not sent again" in ex.error_message
    assert anthropic_fake.requests == []  # the request may have reached the provider: not sent twice
    run = Run.objects.get(run_id=run_id)
    assert run.status == "failed"
    events = Event.objects.filter(run=run).count()
    assert _run_task(result, ex.pk) == "failed"  # once more: nothing changes
    assert Event.objects.filter(run=run).count() == events
    # the dead worker waking up cannot overwrite the ended state
    assert not execute._finish(ex.pk, claim, status="completed")


def test_a_task_run_again_before_its_run_started_resumes_the_call(
    workspace, alice, fake_models, anthropic_fake, stored_tasks
):
    ex = _submit(workspace, alice, fake_models["sonnet"], "resume me")
    result = execute.execution_task.enqueue(str(ex.pk))
    assert execute.claim(ex.pk, f"task:{result.id}")  # claimed, then the worker died at once
    assert _run_task(result, ex.pk) == "completed"
    ex.refresh_from_db()
    assert ex.response_text == "Echo: resume me" and len(anthropic_fake.requests) == 1
    assert Run.objects.get(run_id=ex.run_id).status == "completed"
    # another claim (a second task row) neither resumes nor fails it
    other = execute.execution_task.enqueue(str(ex.pk))
    assert _run_task(other, ex.pk) == "completed" and len(anthropic_fake.requests) == 1


def test_a_refused_enqueue_fails_the_execution_in_words(
    workspace, alice, fake_models, stored_tasks, monkeypatch, django_capture_on_commit_callbacks
):
    def refuse(*args, **kwargs):
        raise RuntimeError("queue unavailable")

    monkeypatch.setattr(stored_tasks, "enqueue", refuse)
    with django_capture_on_commit_callbacks(execute=True):
        ex = _submit(workspace, alice, fake_models["sonnet"])
    ex.refresh_from_db()
    assert ex.status == "failed" and ex.error_code == "EXECUTION_NOT_QUEUED"
    assert "could not be queued" in ex.error_message
