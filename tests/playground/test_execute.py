"""Execution lifecycle, run recording, failure codes and crash recovery."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

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


def test_a_claimed_execution_is_not_run_twice(
    workspace, alice, fake_models, anthropic_fake, settings, django_capture_on_commit_callbacks
):
    settings.PLAYGROUND_EXECUTOR = "worker"
    entry = fake_models["sonnet"]
    with django_capture_on_commit_callbacks(execute=True):
        ex = execute.submit(
            workspace=workspace,
            user=alice,
            entry=entry,
            composition=c.compose(c.Session(prompt="hi"), entry.spec()),
        )
    assert Execution.objects.get(pk=ex.pk).status == "pending"  # the web process only stores
    execute.process(ex.pk, "worker-a")
    execute.process(ex.pk, "worker-b")
    assert len(anthropic_fake.requests) == 1
    assert Execution.objects.get(pk=ex.pk).worker_id == "worker-a"


def test_crash_recovery_fails_a_stale_processing_execution_and_its_run(
    workspace, alice, fake_models, settings
):
    settings.PLAYGROUND_EXECUTOR = "worker"
    entry = fake_models["sonnet"]
    ex = execute.submit(
        workspace=workspace,
        user=alice,
        entry=entry,
        composition=c.compose(c.Session(prompt="hi"), entry.spec()),
    )
    # A worker claims it, starts the run, then dies without finishing.
    assert execute.claim(ex.pk, "dead-worker")
    ex.refresh_from_db()
    recorder = execute.RunRecorder(ex)
    run_id = recorder.start({"model": "m"}, ())
    Execution.objects.filter(pk=ex.pk).update(run_id=run_id, partial_text="half an ans")
    assert execute.recover_stale() == []  # still fresh
    later = timezone.now() + timedelta(seconds=settings.PLAYGROUND_STALE_SECONDS + 1)
    assert execute.recover_stale(now=later) == [ex.pk]
    ex.refresh_from_db()
    assert (
        ex.status == "failed"
        and ex.error_code == "EXECUTION_INTERRUPTED"
        and ex.response_text == "half an ans"
    )
    run = Run.objects.get(run_id=run_id)
    assert run.status == "failed"
    assert execute.recover_stale(now=later) == []
    # the dead worker waking up cannot overwrite the recovered state
    assert not execute._finish(ex.pk, "dead-worker", status="completed")


def test_heal_on_read_and_heartbeat_keeps_a_live_execution(workspace, alice, fake_models, settings):
    settings.PLAYGROUND_EXECUTOR = "worker"
    entry = fake_models["sonnet"]
    ex = execute.submit(
        workspace=workspace,
        user=alice,
        entry=entry,
        composition=c.compose(c.Session(prompt="hi"), entry.spec()),
    )
    runner = execute.Runner(workers=1, prefix="test")
    try:
        assert execute.claim(ex.pk, runner.worker_id)
        old = timezone.now() - timedelta(seconds=settings.PLAYGROUND_STALE_SECONDS + 5)
        Execution.objects.filter(pk=ex.pk).update(heartbeat_at=old)
        runner.beat()  # the worker is alive: its heartbeat refreshes the row
        assert execute.heal(Execution.objects.get(pk=ex.pk)).status == "processing"
        Execution.objects.filter(pk=ex.pk).update(heartbeat_at=old)
        assert execute.heal(Execution.objects.get(pk=ex.pk)).status == "failed"
    finally:
        runner.shutdown()


@pytest.mark.django_db(transaction=True)
def test_worker_command_processes_pending_executions(
    transactional_db, workspace, alice, settings, anthropic_fake
):
    from django.core.management import call_command

    from playground.models import ProviderConfig

    settings.PLAYGROUND_EXECUTOR = "worker"
    provider = ProviderConfig(
        workspace=workspace, name="F", kind="anthropic", base_url=anthropic_fake.url, max_retries=0
    )
    provider.set_api_key("test-anthropic-key")
    provider.save()
    entry = ModelEntry.objects.create(
        workspace=workspace, provider=provider, model_id="claude-sonnet-4-6", display_name="S"
    )
    ids = [
        execute.submit(
            workspace=workspace,
            user=alice,
            entry=entry,
            composition=c.compose(c.Session(prompt=f"q{i}"), entry.spec()),
        ).pk
        for i in range(3)
    ]
    assert set(Execution.objects.values_list("status", flat=True)) == {"pending"}
    from django.db import connection

    # SQLite's shared in-memory test database locks whole tables: one thread there, two on PostgreSQL
    concurrency = "1" if connection.vendor == "sqlite" else "2"
    call_command("playground_worker", "--once", "--concurrency", concurrency)
    done = Execution.objects.filter(pk__in=ids)
    assert {e.status for e in done} == {"completed"}
    assert sorted(e.response_text for e in done) == ["Echo: q0", "Echo: q1", "Echo: q2"]
