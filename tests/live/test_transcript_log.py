"""Seed 003 transcripts recorded live: appended after each commit, before the broadcast."""

from __future__ import annotations

import json
import stat
import threading

import orjson
import pytest
from django.db import connection

from runs import actions
from runs.actions.notify import RunChange, register_listener, unregister_listener
from runs.engine import commands as cmd
from runs.models import Run
from runs.protocol.transcript import CLOSED_TYPES
from runs.telemetry.transcript_log import file_name, follow, record_change, transcript_dir, transcript_path

pytestmark = pytest.mark.django_db


def _lines(run) -> list[dict]:
    return [orjson.loads(raw) for raw in transcript_path(run).read_bytes().splitlines()]


def _start(workspace, workflow, capture, **kw):
    with capture(execute=True):
        return actions.do_start_run(workspace=workspace, workflow=workflow, actor="user:alice", **kw)


def _do(workspace, run, capture, *commands):
    with capture(execute=True):
        return actions.do_commands(
            workspace=workspace, run_id=run.run_id, commands=list(commands), actor="token:1"
        )


def test_events_are_appended_as_they_are_committed(workspace, workflow, django_capture_on_commit_callbacks):
    run = _start(workspace, workflow, django_capture_on_commit_callbacks)
    first = _lines(run)
    assert first[0]["type"] == "run.started" and first[0]["seq"] == 1
    _do(workspace, run, django_capture_on_commit_callbacks, cmd.BeginStep(step_id="parse"))
    _do(
        workspace, run, django_capture_on_commit_callbacks,
        cmd.WriteArtifact(key="notes", type_id="free.notes", data={"a": 1}), cmd.CompleteStep(step_id="parse"),
    )  # fmt: skip
    lines = _lines(run)
    assert lines[: len(first)] == first  # append-only: what was there stays byte for byte
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))
    run.refresh_from_db()
    assert [line["event_seq"] for line in lines[1:]] == list(range(1, run.last_seq + 1))
    assert {line["type"] for line in lines} <= set(CLOSED_TYPES)
    assert all(line["ts"].endswith("Z") for line in lines)
    mode = stat.S_IMODE(transcript_path(run).stat().st_mode)
    assert mode == 0o600


def test_on_disk_before_the_broadcast(workspace, workflow, django_capture_on_commit_callbacks):
    run = _start(workspace, workflow, django_capture_on_commit_callbacks)
    seen: list[int] = []

    def listener(change: RunChange) -> None:  # a broadcaster: the file must already hold the events
        if change.run_id == run.run_id and change.last_seq:
            seen.append(max(line.get("event_seq", 0) for line in _lines(run)))

    register_listener(listener)
    try:
        result = _do(workspace, run, django_capture_on_commit_callbacks, cmd.BeginStep(step_id="parse"))
    finally:
        unregister_listener(listener)
    assert seen == [result.last_seq]


def test_a_change_seen_twice_or_late_writes_each_event_once(
    workspace, workflow, django_capture_on_commit_callbacks
):
    run = _start(workspace, workflow, django_capture_on_commit_callbacks)
    result = actions.do_command(
        workspace=workspace, run_id=run.run_id, command=cmd.BeginStep(step_id="parse")
    )
    change = RunChange(workspace.pk, run.run_id, result.first_seq, result.last_seq, "running", run.pk)
    record_change(change)  # the commit's own callback never ran here: this one catches up
    record_change(change)
    event_seqs = [line.get("event_seq") for line in _lines(run)]
    assert event_seqs == [None, 1]


@pytest.mark.django_db(transaction=True)
def test_concurrent_recorders_keep_one_monotonic_series(workspace, workflow, settings):
    settings.WORKBENCH_TRANSCRIPTS = False  # the commits' own callbacks stay out of this race
    run = actions.do_start_run(workspace=workspace, workflow=workflow)
    result = actions.do_commands(
        workspace=workspace, run_id=run.run_id,
        commands=[cmd.BeginStep(step_id="parse"), cmd.WriteArtifact(key="n", type_id="free.notes", data={"a": 1})],
    )  # fmt: skip
    settings.WORKBENCH_TRANSCRIPTS = True
    change = RunChange(workspace.pk, run.run_id, result.first_seq, result.last_seq, "running", run.pk)

    def record() -> None:
        try:
            record_change(change)
        finally:
            connection.close()

    threads = [threading.Thread(target=record) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = _lines(run)
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))
    assert [line["event_seq"] for line in lines[1:]] == [1, 2]


def test_children_link_both_ways(workspace, workflow, django_capture_on_commit_callbacks):
    parent = _start(workspace, workflow, django_capture_on_commit_callbacks)
    _do(workspace, parent, django_capture_on_commit_callbacks, cmd.BeginStep(step_id="parse"))
    with django_capture_on_commit_callbacks(execute=True):
        child = actions.do_fork_from_state(
            workspace=workspace, parent_run_id=parent.run_id, actor="user:alice"
        )
    with django_capture_on_commit_callbacks(execute=True):
        actions.do_command(workspace=workspace, run_id=child.run_id, command=cmd.CancelRun(reason="done"))
    child_lines = _lines(child)
    assert {line["parent_run_id"] for line in child_lines} == {parent.run_id}
    assert child_lines[-1]["type"] == "run.completed"
    parent_lines = _lines(parent)
    links = [(line["type"], line["child_run_id"]) for line in parent_lines if "child_run_id" in line]
    assert links == [
        ("step.call_workflow.started", child.run_id),
        ("step.call_workflow.completed", child.run_id),
    ]
    assert [line["seq"] for line in parent_lines] == list(range(1, len(parent_lines) + 1))


def test_any_run_id_gets_a_safe_file_and_an_index_entry(
    workspace, workflow, django_capture_on_commit_callbacks
):
    odd = "../../etc/passwd ü/..\\run:*?"
    run = _start(workspace, workflow, django_capture_on_commit_callbacks, run_id=odd)
    path = transcript_path(run)
    assert path.parent == transcript_dir() and path.is_file()
    assert "/" not in path.name and "\x00" not in path.name and not path.name.startswith(".")
    index = [json.loads(line) for line in (transcript_dir() / "index.jsonl").read_text().splitlines()]
    assert {"file": path.name, "workspace": workspace.pk, "run_id": odd} in [
        {k: e[k] for k in ("file", "workspace", "run_id")} for e in index
    ]
    assert file_name(1, "r", None) != file_name(2, "r", None)  # same id, other workspace


def test_follow_yields_new_lines_as_they_arrive(workspace, workflow, django_capture_on_commit_callbacks):
    run = _start(workspace, workflow, django_capture_on_commit_callbacks)
    rounds = iter(range(3))

    def until(finished: bool) -> bool:
        step = next(rounds, None)
        if step == 0:  # the follower has read what exists: the run moves on meanwhile
            _do(workspace, run, django_capture_on_commit_callbacks, cmd.BeginStep(step_id="parse"))
            return False
        return finished or step is None

    got = [orjson.loads(raw) for raw in follow(transcript_path(run), poll=0, until=until)]
    assert [line["type"] for line in got] == ["run.started", "step.started"]
    assert Run.objects.filter(run_id=run.run_id).exists()


def test_api_and_cli_follow_the_recorded_file(
    workspace, workflow, django_capture_on_commit_callbacks, settings
):
    from io import StringIO

    from django.core.management import call_command
    from django.test import Client

    from accounts.tokens import create_token

    run = _start(workspace, workflow, django_capture_on_commit_callbacks)
    _do(workspace, run, django_capture_on_commit_callbacks, cmd.BeginStep(step_id="parse"))
    with django_capture_on_commit_callbacks(execute=True):
        actions.do_command(workspace=workspace, run_id=run.run_id, command=cmd.CancelRun(reason="stop"))
    recorded = transcript_path(run).read_bytes()
    token = create_token(workspace=workspace, name="f", scopes=["read"]).secret
    response = Client().get(
        f"/api/runs/{run.run_id}/transcript.jsonl",
        {"follow": "true"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == recorded  # ends at run.completed
    again = Client().get(
        f"/api/runs/{run.run_id}/transcript.jsonl",
        {"follow": "true", "after_seq": 2},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert b"".join(again.streaming_content) == b"".join(recorded.splitlines(keepends=True)[2:])
    out = StringIO()
    call_command("transcript", run.run_id, "--follow", stdout=out)
    assert out.getvalue().encode() == recorded


def test_lines_written_from_the_committed_batch_equal_those_read_back(
    workspace, workflow, django_capture_on_commit_callbacks
):
    """The sink writes an action's batch from memory; the same file rebuilt from the database (a
    change without its events, as after a restart) is byte for byte the same."""
    run = _start(workspace, workflow, django_capture_on_commit_callbacks)
    _do(workspace, run, django_capture_on_commit_callbacks, cmd.BeginStep(step_id="parse"))
    events = [
        {"id": "evt_m1", "runId": run.run_id, "ts": "2028-02-29T23:59:59.5+01:00", "type": "model_io",
         "direction": "response", "provider": "anthropic", "model": "m", "stepId": "parse",
         "usage": {"inputTokens": 1e3, "outputTokens": 2}, "cost": {"amount": 1e-6, "currency": "USD"}},
        {"id": "evt_t1", "runId": run.run_id, "ts": "2026-03-01T00:00:00.000Z", "type": "tool_call",
         "name": "search", "args": {"q": "x\u0000y"}, "result": {"n": -0.0}, "stepId": "parse"},
        {"id": "evt_a1", "runId": run.run_id, "ts": "2026-03-01T00:00:01Z", "type": "annotation", "text": "hi"},
    ]  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        actions.do_append_events(workspace=workspace, run_id=run.run_id, events=events, actor="token:1")
    assert callbacks  # the sink ran with the batch in hand
    from_memory = transcript_path(run).read_bytes()
    transcript_path(run).unlink()
    run.refresh_from_db()
    record_change(RunChange.of(run, 1, run.last_seq))  # no events: read back from the database
    assert transcript_path(run).read_bytes() == from_memory
