"""Transcript: protocol events -> JSON lines (pure mapping, the stored run, the CLI)."""

from __future__ import annotations

import io
import os
import stat

import orjson
import pytest
from django.core.management import call_command

from runs.protocol.transcript import (
    CLOSED_TYPES,
    ChildRun,
    StoredEvent,
    dump_line,
    event_lines,
    line_bytes,
    transcript_lines,
)

RUN = {
    "id": "run_t1",
    "workflowId": "wf",
    "workflowVersion": 1,
    "workflowSnapshot": {"id": "wf", "version": 1, "steps": [{"id": "a"}], "edges": []},
    "startedAt": "2026-01-01T00:00:00.000Z",
    "status": "running",
}


def ev(seq: int, **fields) -> StoredEvent:
    body = {"id": f"e{seq}", "runId": "run_t1", "ts": f"2026-01-01T00:00:{seq:02d}.000Z", **fields}
    return StoredEvent(seq, body, fields.pop("_actor", "token:abc"))


def test_lines_are_numbered_from_one_and_typed():
    events = [
        ev(1, type="step_started", stepId="a"),
        ev(
            2,
            type="model_io",
            direction="request",
            stepId="a",
            payload={"system": "be brief", "messages": [{"role": "user", "content": "hi"}]},
        ),
        ev(
            3,
            type="model_io",
            direction="response",
            stepId="a",
            provider="anthropic",
            model="m",
            usage={"inputTokens": 1, "outputTokens": 2},
            payload={
                "content": [
                    {"type": "thinking", "thinking": "hmm"},
                    {"type": "text", "text": "hello"},
                    {"type": "tool_use", "id": "tu1", "name": "search", "input": {"q": "x"}},
                ]
            },
        ),
        ev(
            4,
            type="tool_call",
            stepId="a",
            name="search",
            args={"q": "x"},
            result={"hits": 2},
            correlationId="tu1",
        ),
        ev(5, type="step_completed", stepId="a", ok=True),
        ev(6, type="run_status_changed", status="completed"),
    ]
    lines = list(transcript_lines({**RUN, "status": "completed"}, events))
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))
    assert [line["type"] for line in lines] == [
        "run.started",
        "step.started",
        "message.user",
        "message.assistant",
        "tool.call",
        "tool.result",
        "step.completed",
        "run.completed",
    ]
    user = lines[2]["payload"]
    assert user["system_prompt"] == "be brief"
    assert user["blocks"] == [{"type": "text", "text": "hi", "fidelity": "agent_emitted"}]
    blocks = lines[3]["payload"]["blocks"]
    assert [b["type"] for b in blocks] == ["thinking", "text", "tool_use"]  # mixed blocks keep their order
    assert blocks[2]["tool_input"] == {"q": "x"} and blocks[2]["tool_id"] == "tu1"
    assert lines[3]["payload"]["usage"] == {"inputTokens": 1, "outputTokens": 2}
    assert lines[4]["event_seq"] == lines[5]["event_seq"] == 4
    assert lines[5]["payload"]["tool_content"] == {"hits": 2}
    assert all(line["path"] == "a" for line in lines[1:7]) and lines[0]["path"] == ""
    # exactly one synthesized-free run.completed
    assert sum(1 for line in lines if line["type"] == "run.completed") == 1


def test_dangling_tool_use_and_openai_shapes():
    call = event_lines({"type": "tool_call", "name": "fetch", "args": {"u": 1}}, "token:x")
    assert [kind for kind, _ in call] == ["tool.call"]  # no result: recorded as-is, no invented result
    reply = event_lines(
        {
            "type": "model_io",
            "direction": "response",
            "payload": {
                "choices": [
                    {
                        "message": {
                            "content": "ok",
                            "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": '{"a": 1}'}}],
                        }
                    }
                ]
            },
        },
        "token:x",
    )
    blocks = reply[0][1]["blocks"]
    assert [b["type"] for b in blocks] == ["text", "tool_use"]
    assert blocks[1]["tool_input"] == {"a": 1}
    chunk = event_lines({"type": "model_io", "direction": "stream_chunk", "payload": {"delta": "par"}}, "")
    assert chunk[0][0] == "message.assistant" and chunk[0][1]["blocks"][0] == {
        "type": "stream",
        "fidelity": "agent_emitted",
        "text": "par",
    }


def test_fidelity_follows_who_recorded_the_event():
    router = event_lines({"type": "tool_call", "name": "t", "args": {}, "result": 1}, "playground:exec")
    agent = event_lines({"type": "tool_call", "name": "t", "args": {}, "result": 1}, "token:abc")
    assert {p["fidelity"] for _, p in router} == {"router"}
    assert {b["fidelity"] for _, p in router for b in p["blocks"]} == {"router"}
    assert {p["fidelity"] for _, p in agent} == {"agent_emitted"}


def test_other_protocol_types_map_into_the_closed_vocabulary():
    """Seed 003: every line's type is one of ten; the other protocol events are mapped explicitly."""
    lines = event_lines(
        {"type": "human_gate_requested", "id": "x", "stepId": "a", "gate": "PAUSE_BEFORE"}, ""
    )
    assert lines == [
        ("step.started", {"kind": "gate", "event_type": "human_gate_requested", "gate": "PAUSE_BEFORE"})
    ]
    assert event_lines({"type": "error", "message": "boom"}, "") == [
        ("step.completed", {"kind": "error", "event_type": "error", "ok": False, "message": "boom"})
    ]
    assert event_lines({"type": "future_thing", "x": 1}, "") == [
        ("step.completed", {"kind": "event", "event_type": "future_thing", "x": 1})
    ]
    samples = [
        {"type": t, "stepId": "a", "status": "running"}
        for t in ("human_gate_resolved", "span_started", "span_ended", "artifact_written", "artifact_patch",
                  "rule_changed", "policy_changed", "annotation", "run_forked", "run_status_changed")
    ]  # fmt: skip
    assert {kind for sample in samples for kind, _ in event_lines(sample, "")} <= set(CLOSED_TYPES)


def test_timestamps_are_normalized_to_utc():
    shifted = StoredEvent(
        1, {**ev(1, type="step_started", stepId="a").body, "ts": "2026-01-01T05:30:01.5+05:30"}
    )
    lines = list(transcript_lines({**RUN, "startedAt": "2025-12-31T19:00-05:00"}, [shifted]))
    assert [line["ts"] for line in lines] == ["2026-01-01T00:00:00.000Z", "2026-01-01T00:00:01.500Z"]


def test_lineage_parent_and_child_lines():
    child_doc = {**RUN, "id": "run_child", "context": {"parentRunId": "run_t1", "forkedFromStepId": "a"}}
    child_lines = list(transcript_lines(child_doc, [ev(1, type="step_started", stepId="a")]))
    assert {line["parent_run_id"] for line in child_lines} == {"run_t1"}
    kids = [
        ChildRun("run_child", "wf", "2026-01-01T00:00:01.500Z", "2026-01-01T00:00:02.500Z", "completed", "a")
    ]
    parent_lines = list(
        transcript_lines(
            RUN,
            [
                ev(1, type="step_started", stepId="a"),
                ev(2, type="annotation", text="x"),
                ev(3, type="annotation", text="y"),
            ],
            kids,
        )
    )
    kinds = [line["type"] for line in parent_lines]
    assert kinds == [
        "run.started",
        "step.started",
        "step.call_workflow.started",
        "step.completed",
        "step.call_workflow.completed",
        "step.completed",
    ]
    assert parent_lines[2]["child_run_id"] == "run_child" and parent_lines[2]["path"] == "a"
    assert "parent_run_id" not in parent_lines[0]


def test_dump_line_is_one_json_object_even_with_nul_bytes():
    raw = dump_line({"seq": 1, "payload": {"text": "a\x00b\nc"}})
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    assert orjson.loads(raw)["payload"]["text"] == "a\x00b\nc"


def test_dump_line_spells_numbers_as_javascript_and_keeps_member_order():
    raw = dump_line({"seq": 1, "usage": {"z": 1e-6, "a": -0.0, "n": [1000.0, 2**53, 1e21, 2.0**64]}})
    assert (
        raw
        == b'{"seq":1,"usage":{"z":0.000001,"a":0,"n":[1000,9007199254740992,1e+21,18446744073709552000]}}\n'
    )


@pytest.mark.parametrize(
    "args",
    [
        (1, "run_a", "", "2026-01-01T00:00:00.001Z", "step.started", {"kind": "span", "n": 3}, 1, "evt_1"),
        (7, "run_b", "s1", "x", "message.user", {"usage": {"z": 1e-6, "a": -0.0, "big": 2**60}}, 2, None),
        (2**53, "run_c", "", "t", "step.completed", {}, None, None),  # a seq beyond 2**53 - 1
        (3, "run_d", "", "t", "tool.call", {"text": "lone \ud800 surrogate"}, 2**54, "e"),
        (4, "run_\udc00", "p\x00", "t", "tool.result", {"a": [1.5, 2.0]}, 4, "e", "child", "parent"),
        (5, "run_e", "", "t", "step.started", {"deep": [[[[1.0]]]]}, 5, "e", None, "parent"),
    ],
)
def test_line_bytes_are_the_dump_line_of_the_same_line(args):
    seq, run_id, path, ts, kind, payload, event_seq, event_id, *rest = args
    child, parent = rest if rest else (None, None)
    line = {"seq": seq, "run_id": run_id, "path": path, "ts": ts, "type": kind, "payload": payload}
    for key, value in (("event_seq", event_seq), ("event_id", event_id), ("child_run_id", child),
                       ("parent_run_id", parent)):  # fmt: skip
        if value is not None:
            line[key] = value
    assert line_bytes(seq, run_id, path, ts, kind, payload, event_seq, event_id, child, parent) == dump_line(
        line
    )


@pytest.mark.django_db
def test_stored_run_via_command_and_api(tmp_path, workspace, alice, charlie, workflow, client):
    from runs import actions
    from runs.engine import commands as cmd

    run = actions.do_start_run(workspace=workspace, workflow=workflow, actor="user:alice", run_id="run_cli")
    actions.do_command(
        workspace=workspace, run_id=run.run_id, command=cmd.BeginStep(step_id="parse"), actor="token:a"
    )
    actions.do_command(
        workspace=workspace,
        run_id=run.run_id,
        command=cmd.LogToolCall(name="grep", args={"p": "x"}, result={"n": 3}, step_id="parse"),
        actor="playground:exec",
    )
    actions.do_fork_from_state(
        workspace=workspace, parent_run_id=run.run_id, new_run_id="run_cli_fork", actor="user:alice"
    )

    target = tmp_path / "out.jsonl"
    target.write_text("old")
    os.chmod(target, 0o644)
    call_command("transcript", "run_cli", "-o", str(target))
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    lines = [orjson.loads(line) for line in target.read_bytes().splitlines()]
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))
    kinds = [line["type"] for line in lines]
    assert kinds[:3] == ["run.started", "step.started", "tool.call"]
    assert "step.call_workflow.started" in kinds
    assert next(line for line in lines if line["type"] == "tool.call")["payload"]["fidelity"] == "router"

    out = io.StringIO()
    call_command("transcript", "run_cli_fork", stdout=out)
    fork_lines = [orjson.loads(line) for line in out.getvalue().splitlines()]
    assert fork_lines and {line["parent_run_id"] for line in fork_lines} == {"run_cli"}

    client.force_login(alice)
    response = client.get("/api/runs/run_cli/transcript.jsonl")
    if response.status_code == 404 and b"UNKNOWN_RUN" not in response.content:
        pytest.skip("REST API not mounted yet")
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == target.read_bytes()
    client.force_login(charlie)
    assert client.get("/api/runs/run_cli/transcript.jsonl").status_code == 404
    client.logout()
    assert client.get("/api/runs/run_cli/transcript.jsonl").status_code == 401
