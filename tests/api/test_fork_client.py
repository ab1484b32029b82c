"""A host pipeline in another process replays through workbench_sdk.client (live server on loopback),
and the `fork` command with a task worker running the fork it queued."""

from __future__ import annotations

import io

import orjson
import pytest
from django.core.management import call_command
from django_tasks_db.models import DBTaskResult
from workbench_sdk.client import WorkbenchClient, make_event

from runs.models import RunFork
from tests.task_backends import DATABASE, task_backend

REQUEST = {"model": "claude-haiku-4-5", "max_tokens": 32, "messages": [{"role": "user", "content": "Hi"}]}
ANSWER = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "content": [{"type": "text", "text": "Hello"}],
}


@pytest.fixture
def token(transactional_db, workspace):
    from accounts.tokens import create_token

    return create_token(workspace=workspace, name="host", scopes=["read", "write"]).secret


def pipeline(wb: WorkbenchClient, run_id: str, *, replay_of: str | None = None) -> None:
    """The host's pipeline: asks the server's cache first when it is replaying."""
    wb.append_events(run_id, [make_event(run_id, "step_started", stepId="parse")])
    wb.append_events(
        run_id,
        [
            make_event(
                run_id,
                "model_io",
                stepId="parse",
                correlationId="c1",
                direction="request",
                provider="anthropic",
                model="claude-haiku-4-5",
                payload=REQUEST,
            )
        ],
    )
    cached = (
        wb.cached_response("anthropic", "claude-haiku-4-5", REQUEST, prefer_run_id=replay_of)
        if replay_of
        else None
    )
    response = (
        cached["response"] if cached else {"payload": ANSWER, "usage": {"inputTokens": 3, "outputTokens": 1}}
    )
    wb.append_events(
        run_id,
        [
            make_event(
                run_id,
                "model_io",
                stepId="parse",
                correlationId="c1",
                direction="response",
                provider="anthropic",
                model="claude-haiku-4-5",
                payload=response["payload"],
                usage=response["usage"],
            ),
            make_event(run_id, "step_completed", stepId="parse", ok=True),
        ],
    )


def test_host_replays_through_the_client(live_server, token, workflow):
    with WorkbenchClient(live_server.url, token, sleep=lambda s: None) as wb:
        run_id = wb.start_run(workflow=workflow)["runId"]
        pipeline(wb, run_id)
        fork = wb.replay(run_id)
        assert fork["status"] == "external" and fork["sourceRunId"] == run_id
        assert wb.cached_response("anthropic", "claude-haiku-4-5", {**REQUEST, "max_tokens": 33}) is None
        pipeline(wb, fork["runId"], replay_of=run_id)
        report = wb.determinism(fork["runId"])
        assert report["score"] == 1.0 and report["comparedEvents"] == 4
        tracer_answer = wb.replay_fn(prefer_run_id=run_id)("anthropic", "claude-haiku-4-5", REQUEST)
        assert tracer_answer == ANSWER


def test_fork_command(transactional_db, workspace, settings):
    from runs.demo.job_search import JOB_SEARCH_WORKFLOW, job_search_program
    from runs.execution.host import Workbench
    from runs.execution.replay import run_program

    source = run_program(
        Workbench(workspace=workspace), workflow=JOB_SEARCH_WORKFLOW, program=job_search_program
    )
    out = io.StringIO()
    call_command("fork", source.run_id, "--workspace", "acme", "--from-seq", "5", "--wait", stdout=out)
    result = orjson.loads(out.getvalue())
    assert result["status"] == "completed" and result["determinism"]["score"] == 1.0
    out = io.StringIO()
    with task_backend(DATABASE):  # the fork's task is a row; a worker process runs it
        call_command(
            "fork", source.run_id, "--workspace", "acme", "--mode", "branch", "--from-seq", "5", stdout=out
        )
        branch = orjson.loads(out.getvalue())
        assert branch["status"] == "pending"
        assert DBTaskResult.objects.filter(task_path="runs.execution.replay.fork_task").count() == 1
        call_command("db_worker", batch=True, reload=False, startup_delay=False, verbosity=0)
    assert RunFork.objects.get(run__run_id=branch["runId"]).status == "completed"
    assert DBTaskResult.objects.get(task_path="runs.execution.replay.fork_task").status == "SUCCESSFUL"
    out = io.StringIO()
    call_command("fork", "report", result["runId"], "--workspace", "acme", stdout=out)
    assert orjson.loads(out.getvalue())["score"] == 1.0
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="SEQ_OUT_OF_RANGE"):
        call_command("fork", source.run_id, "--workspace", "acme", "--from-seq", "999")
