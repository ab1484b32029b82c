"""Acceptance: the official MCP SDK client against a real daphne process serving /api/mcp.

One daphne subprocess (SQLite file database) for the module. Clients of protocol 2026-07-28
(``mode="auto"``: server/discover, stateless core) and of 2025-11-25 (``mode="legacy"``:
initialize handshake) drive the same tools; a 2025-06-18 client is spoken to in raw JSON-RPC.
Owner, read-only and outsider tokens (another workspace) and no token at all.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import threading
import time

import httpx
import pytest

from tests.conftest import LINEAR_WORKFLOW
from tests.live.cluster import Cluster

pytest.importorskip("mcp")

import httpx2  # noqa: E402
from mcp.client.client import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp_types import InputRequiredResult  # noqa: E402

REQUIRED_TOOLS = {
    "list_runs",
    "get_run",
    "verify_run_integrity",
    "validate_run_bundle",
    "start_run",
    "resolve_gate",
    "write_artifact",
    "export_bundle",
}
MUTATING = {
    "start_run": {"workflow": LINEAR_WORKFLOW},
    "resolve_gate": {"runId": "run_mcp", "stepId": "review", "gate": "PAUSE_BEFORE", "decision": "approved"},
    "write_artifact": {"runId": "run_mcp", "artifactKey": "notes", "typeId": "any", "data": {"a": 1}},
    "request_decision": {"runId": "run_mcp", "stepId": "parse"},
    "fork_run": {"runId": "run_mcp"},
}

TOKENS = r"""
from accounts.tokens import create_token
from runs.actions.workspaces import get_or_create_workspace
acme = get_or_create_workspace("acme", name="Acme")
globex = get_or_create_workspace("globex", name="Globex")
print("READ " + create_token(workspace=acme, name="ro", scopes=["read"]).secret)
print("OUTSIDER " + create_token(workspace=globex, name="other", scopes=["read", "write", "review"]).secret)
"""


@pytest.fixture(scope="module")
def server():
    with Cluster(database="sqlite", servers=1) as cluster:
        seed = cluster.seed(workflow=LINEAR_WORKFLOW, run_id="run_mcp")
        lines = dict(line.split(" ", 1) for line in cluster.python(TOKENS).splitlines() if " " in line)
        yield {
            "cluster": cluster,
            "url": cluster.url(0, "/api/mcp"),
            "owner": seed["token"],
            "session": seed["sessions"]["alice"],
            "read": lines["READ"],
            "outsider": lines["OUTSIDER"],
        }


def run(coro):
    return asyncio.run(coro)


def client(url: str, token: str | None, mode: str) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=60)
    return Client(streamable_http_client(url, http_client=http), mode=mode)


def error_text(result) -> str:
    assert result.is_error, result
    return " ".join(getattr(block, "text", "") for block in result.content)


@pytest.mark.parametrize("mode, version", [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_tools_listed_without_a_token(server, mode, version):
    async def scenario():
        async with client(server["url"], None, mode) as c:
            assert c.protocol_version == version
            tools = {tool.name: tool for tool in (await c.list_tools()).tools}
            assert REQUIRED_TOOLS <= set(tools)
            assert {"request_decision", "fork_run"} <= set(tools)
            for tool in tools.values():
                assert tool.input_schema["type"] == "object"
                assert tool.output_schema is not None and tool.output_schema["type"] == "object"
            # Reading needs a token: a 401 (whose challenge starts an OAuth sign-in), and no
            # resources are listed.
            with pytest.raises(MCPError, match="UNAUTHENTICATED"):
                await c.call_tool("list_runs", {})
            assert (await c.list_resources()).resources == []

    run(scenario())


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_owner_reads_runs_and_bundles(server, mode):
    async def scenario():
        async with client(server["url"], server["owner"], mode) as c:
            listed = await c.call_tool("list_runs", {})
            assert not listed.is_error
            assert [r["id"] for r in listed.structured_content["runs"]] == ["run_mcp"]
            detail = (await c.call_tool("get_run", {"runId": "run_mcp"})).structured_content
            assert detail["run"]["workflowId"] == "wf-demo" and detail["stepStatus"]["parse"] == "pending"

            resources = (await c.list_resources()).resources
            assert [str(r.uri) for r in resources] == ["runs://run_mcp"]
            text = (await c.read_resource("runs://run_mcp")).contents[0].text
            bundle = json.loads(text)
            assert bundle["run"]["id"] == "run_mcp" and len(bundle["integrity"]["sha256"]) == 64

            verified = (await c.call_tool("verify_run_integrity", {"runId": "run_mcp"})).structured_content
            assert verified["ok"] is True and verified["sha256"] == bundle["integrity"]["sha256"]
            exported_result = await c.call_tool("export_bundle", {"runId": "run_mcp"})
            exported = exported_result.structured_content
            # ... and the bytes themselves, as an embedded resource with its URI and media type
            embedded = [block for block in exported_result.content if block.type == "resource"]
            assert len(embedded) == 1 and str(embedded[0].resource.uri) == "runs://run_mcp"
            assert embedded[0].resource.mime_type == "application/json"
            assert embedded[0].resource.text == exported["bundle"]
            # The same bundle as the resource, each signed for this token at its own time.
            signed = json.loads(exported["bundle"])
            signatures = [signed["integrity"].pop("attestations"), bundle["integrity"].pop("attestations")]
            assert signed == bundle and all(len(s) == 1 for s in signatures)
            assert verified["signature"]["status"] == "signed"
            assert verified["signature"]["exportedBy"].startswith("token:")

            valid = (await c.call_tool("validate_run_bundle", {"bundle": text})).structured_content
            assert valid["ok"] is True and valid["integrity"] == "valid"
            assert valid["signature"]["status"] == "signed"
            tampered = text.replace('"wf-demo"', '"wf-demo2"', 1)
            bad = (await c.call_tool("validate_run_bundle", {"bundle": tampered})).structured_content
            assert bad["ok"] is False and bad["code"] in ("INTEGRITY_MISMATCH", "INVALID_RUN_BUNDLE")
            broken = (await c.call_tool("validate_run_bundle", {"bundle": "{not json"})).structured_content
            assert broken["code"] == "INVALID_JSON"

    run(scenario())


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_redacted_bundles_by_tool_and_resource(server, mode):
    """The export tool's ``redact`` and the resource's ``?redact=`` give the REST export's redacted
    bundle: the workflow's title (free text) is masked, the structure stays."""

    async def scenario():
        async with client(server["url"], server["read"], mode) as c:
            tool = await c.call_tool("export_bundle", {"runId": "run_mcp", "redact": "mask"})
            assert not tool.is_error, tool
            exported = tool.structured_content
            assert exported["uri"] == "runs://run_mcp?redact=mask"
            text = (await c.read_resource(exported["uri"])).contents[0].text
            bundle = json.loads(text)
            # The same bundle as the tool's, each signed (at its own time) naming the policy.
            tool_bundle = json.loads(exported["bundle"])
            for signed in (bundle, tool_bundle):
                (envelope,) = signed["integrity"].pop("attestations")
                statement = json.loads(base64.b64decode(envelope["payload"]))
                assert statement["predicate"]["redaction"] == "mask"
            assert bundle == tool_bundle
            assert bundle["run"]["metadata"]["workbench.redaction"]["policy"] == "mask"
            assert bundle["run"]["workflowSnapshot"]["title"] == "[REDACTED]"
            assert "Parse, review, publish" not in text
            assert [s["id"] for s in bundle["run"]["workflowSnapshot"]["steps"]] == [
                "parse",
                "review",
                "publish",
            ]
            dropped = json.loads((await c.read_resource("runs://run_mcp?redact=drop")).contents[0].text)
            assert "title" not in dropped["run"]["workflowSnapshot"]
            assert (await c.call_tool("export_bundle", {"runId": "run_mcp", "redact": "all"})).is_error

    run(scenario())


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_outsider_sees_nothing(server, mode):
    async def scenario():
        async with client(server["url"], server["outsider"], mode) as c:
            assert (await c.call_tool("list_runs", {})).structured_content == {"runs": []}
            assert (await c.list_resources()).resources == []
            foreign = error_text(await c.call_tool("get_run", {"runId": "run_mcp"}))
            missing = error_text(await c.call_tool("get_run", {"runId": "run_nope"}))
            assert foreign.replace("run_mcp", "X") == missing.replace("run_nope", "X")
            assert "UNKNOWN_RUN" in foreign
            for tool in ("export_bundle", "verify_run_integrity"):
                assert "UNKNOWN_RUN" in error_text(await c.call_tool(tool, {"runId": "run_mcp"}))
            write = error_text(await c.call_tool("write_artifact", MUTATING["write_artifact"]))
            assert "UNKNOWN_RUN" in write
            with pytest.raises(Exception) as excinfo:
                await c.read_resource("runs://run_mcp")
            assert "UNKNOWN_RUN" in str(excinfo.value)

    run(scenario())


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_mutating_tools_need_a_write_scoped_token(server, mode):
    async def scenario():
        for token in (None, server["read"]):
            async with client(server["url"], token, mode) as c:
                for name, args in MUTATING.items():
                    if token is None:  # no credentials: HTTP 401, raised by the SDK
                        with pytest.raises(MCPError, match="UNAUTHENTICATED"):
                            await c.call_tool(name, args)
                        continue
                    text = error_text(await c.call_tool(name, args))
                    assert "FORBIDDEN" in text, (name, text)
        # Nothing was written by the refused calls.
        async with client(server["url"], server["owner"], mode) as c:
            listed = (await c.call_tool("list_runs", {})).structured_content["runs"]
            assert [r["id"] for r in listed if r["workflowId"] == "wf-demo"][-1] == "run_mcp"
            detail = (await c.call_tool("get_run", {"runId": "run_mcp"})).structured_content
            assert detail["artifacts"] == {} or "notes" not in detail["artifacts"]

    run(scenario())


def test_owner_writes_through_the_actions(server):
    async def scenario():
        async with client(server["url"], server["owner"], "auto") as c:
            started = await c.call_tool("start_run", {"workflow": LINEAR_WORKFLOW, "runId": "run_mcp_w"})
            assert started.structured_content["created"] is True
            again = error_text(
                await c.call_tool("start_run", {"workflow": LINEAR_WORKFLOW, "runId": "run_mcp_w"})
            )
            assert "RUN_ID_COLLISION" in again
            invalid = error_text(
                await c.call_tool("start_run", {"workflow": {"id": "x", "version": 1, "steps": []}})
            )
            assert "INVALID_WORKFLOW" in invalid or "INVALID_INPUT" in invalid, invalid
            resolved = await c.call_tool(
                "resolve_gate",
                {"runId": "run_mcp_w", "stepId": "review", "gate": "PAUSE_BEFORE", "decision": "approved"},
            )
            assert not resolved.is_error and resolved.structured_content["seqs"] == [1]
            wrong = error_text(
                await c.call_tool(
                    "resolve_gate",
                    {"runId": "run_mcp_w", "stepId": "nope", "gate": "PAUSE_BEFORE", "decision": "approved"},
                )
            )
            assert "UNKNOWN_STEP" in wrong
            forked = await c.call_tool(
                "fork_run", {"runId": "run_mcp_w", "fromSeq": 0, "newRunId": "run_mcp_f"}
            )
            assert forked.structured_content["runId"] == "run_mcp_f", forked
            assert forked.structured_content["parentRunId"] == "run_mcp_w"
            detail = (await c.call_tool("get_run", {"runId": "run_mcp_f"})).structured_content
            assert detail["run"]["context"]["parentRunId"] == "run_mcp_w"
            replay = await c.call_tool(
                "fork_run", {"runId": "run_mcp_w", "mode": "replay", "newRunId": "run_mcp_r"}
            )
            assert replay.structured_content["mode"] == "replay", replay
            detail = (await c.call_tool("get_run", {"runId": "run_mcp_r"})).structured_content
            assert detail["run"]["context"]["parentRunId"] == "run_mcp_w"
            branch = error_text(await c.call_tool("fork_run", {"runId": "run_mcp_w", "mode": "branch"}))
            assert "INVALID_INPUT" in branch and "fromSeq" in branch  # a branch needs its fork point

    run(scenario())
    # The event written over MCP is in the REST view of the run, attributed to the token.
    cluster, token = server["cluster"], server["owner"]
    events = httpx.get(
        cluster.url(0, "/api/runs/run_mcp_w/events"), headers={"Authorization": f"Bearer {token}"}, timeout=30
    ).json()["events"]
    assert [e["event"]["type"] for e in events] == ["human_gate_resolved"]


def test_invalid_token_is_a_401(server):
    response = httpx.post(
        server["url"],
        headers={"Authorization": "Bearer wbt_nope_nopenopenopenopenopenope", "Accept": "application/json"},
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        timeout=30,
    )
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert "UNAUTHENTICATED" in response.json()["error"]["message"]


def test_a_2025_06_18_client_in_raw_json_rpc(server):
    headers = {
        "Authorization": f"Bearer {server['owner']}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    with httpx.Client(timeout=30) as http:
        init = http.post(
            server["url"],
            headers=headers,
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "old", "version": "1"},
                },
            },
        )
        assert init.status_code == 200
        assert init.json()["result"]["protocolVersion"] == "2025-06-18"
        assert "mcp-session-id" not in init.headers  # stateless: nothing to stick to
        headers["MCP-Protocol-Version"] = "2025-06-18"
        call = http.post(
            server["url"],
            headers=headers,
            json={
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "list_runs", "arguments": {}},
            },
        ).json()["result"]
        assert "run_mcp" in [r["id"] for r in call["structuredContent"]["runs"]]


def test_an_agent_waits_for_a_human_decision(server):
    """request_decision: "input required" (2026-07-28) / "pending" (2025-11-25) until a reviewer decides."""
    cluster, token = server["cluster"], server["owner"]

    async def ask():
        async with client(server["url"], token, "auto") as c:
            await c.call_tool("start_run", {"workflow": LINEAR_WORKFLOW, "runId": "run_mcp_ask"})
            args = {
                "runId": "run_mcp_ask",
                "stepId": "parse",
                "reason": "is the profile right?",
                "waitSeconds": 0,
            }
            first = await c.session.call_tool("request_decision", args, allow_input_required=True)
            assert isinstance(first, InputRequiredResult) and first.request_state
            again = await c.session.call_tool(
                "request_decision", args, request_state=first.request_state, allow_input_required=True
            )
            assert isinstance(again, InputRequiredResult)  # still nobody decided
            return args, again.request_state

    args, state = run(ask())

    async def legacy_pending():
        async with client(server["url"], token, "legacy") as c:
            result = await c.call_tool("request_decision", {**args, "ticket": 1})
            return result.structured_content

    pending = run(legacy_pending())
    assert pending["status"] == "pending" and pending["ticket"] == 1
    # The reviewer decides (the REST door the gate panel shares: the same action).
    resolved = httpx.post(
        cluster.url(0, "/api/runs/run_mcp_ask/gates/resolve"),
        headers={"Authorization": f"Bearer {token}"},
        json={
            "stepId": "parse",
            "gate": "CHECKPOINT",
            "checkpoint": "agent-decision",
            "decision": "approved",
            "note": "fine",
        },
        timeout=30,
    )
    assert resolved.status_code == 200, resolved.text

    async def answer():
        async with client(server["url"], token, "auto") as c:
            done = await c.session.call_tool(
                "request_decision", args, request_state=state, allow_input_required=True
            )
            assert not isinstance(done, InputRequiredResult)
            return done.structured_content

    decided = run(answer())
    assert decided["status"] == "decided" and decided["decision"] == "approved" and decided["note"] == "fine"
    assert decided["decidedBy"].startswith("token:")


def test_answers_spell_numbers_as_javascript_and_keep_member_order(server):
    """Structured content, its text and the JSON-RPC envelope: JSON as the rest of the server writes it."""
    headers = {
        "Authorization": f"Bearer {server['owner']}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-06-18",
    }
    python_numbers = "[1e-06, -0.0, 9007199254740992, 1e+21, 1.8446744073709552e+19, 1000.0]"
    js_numbers = "[0.000001,0,9007199254740992,1e+21,18446744073709552000,1000]"
    workflow = json.dumps(LINEAR_WORKFLOW)
    start = (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "start_run", "arguments": '
        f'{{"workflow": {workflow}, "runId": "run_mcp_numbers", "metadata": {{"z": {python_numbers}, "a": -0.0}}}}}}}}'
    )
    get = (
        '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "get_run", '
        '"arguments": {"runId": "run_mcp_numbers"}}}'
    )
    with httpx.Client(timeout=30) as http:
        started = http.post(server["url"], headers=headers, content=start.encode())
        assert started.status_code == 200 and '"isError":true' not in started.text, started.text
        body = http.post(server["url"], headers=headers, content=get.encode()).text
    metadata = f'"metadata":{{"z":{js_numbers},"a":0}}'
    assert metadata in body  # structuredContent
    assert json.dumps(metadata)[1:-1] in body  # the same JSON as the text content
    for python_spelling in ("1e-06", "-0.0", "e+19", "1000.0"):
        assert python_spelling not in body
    assert json.loads(body)["result"]["structuredContent"]["run"]["metadata"]["z"][3] == 1e21


# --------------------------------------------------------------------------------------------
# Waiting for a person with the SDK's stock loop (Client.call_tool, exactly as a host calls it)


def _gate_form(page: str, step_id: str) -> dict[str, str]:
    """The hidden fields of the gate panel's decision form for ``step_id``, as a browser sends them."""
    for form in re.findall(r"<form[^>]*gates/resolve/[^>]*>(.*?)</form>", page, re.S):
        fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form))
        if fields.get("step_id") == step_id:
            return fields
    raise AssertionError(f"no decision form for {step_id} on the gate panel")


def decide_on_the_gate_panel(cluster, session: str, run_id: str, step_id: str, *, after: float, **choice):
    """A reviewer, signed in, opens the run page once the request shows and presses a button."""
    time.sleep(after)
    with httpx.Client(base_url=cluster.url(0, ""), cookies={"sessionid": session}, timeout=30) as http:
        deadline = time.monotonic() + 30
        while True:
            page = http.get(f"/runs/{run_id}/")
            assert page.status_code == 200, page.status_code
            if "gates/resolve/" in page.text or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        fields = _gate_form(page.text, step_id)
        answer = http.post(f"/runs/{run_id}/gates/resolve/", data={**fields, **choice})
        assert answer.status_code in (200, 302), answer.text[:300]


def in_background(fn, *args, **kwargs) -> threading.Thread:
    errors: list[BaseException] = []

    def target():
        try:
            fn(*args, **kwargs)
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.errors = errors  # type: ignore[attr-defined]
    thread.start()
    return thread


def test_the_stock_loop_waits_for_a_reviewer_on_2026_07_28(server):
    """mode="auto": Client.call_tool drives "input required" by itself (10 rounds, 2.4 s of
    back-off in mcp 2.3). The reviewer decides on the gate panel 4 s later: the call answers with
    the decision instead of raising InputRequiredRoundsExceededError."""
    cluster = server["cluster"]

    async def ask():
        async with client(server["url"], server["owner"], "auto") as c:
            assert c.protocol_version == "2026-07-28"
            await c.call_tool("start_run", {"workflow": LINEAR_WORKFLOW, "runId": "run_mcp_wait"})
            reviewer = in_background(
                decide_on_the_gate_panel,
                cluster,
                server["session"],
                "run_mcp_wait",
                "parse",
                after=4,
                decision="rejected",
                note="wrong profile",
            )
            started = time.monotonic()
            result = await c.call_tool(
                "request_decision", {"runId": "run_mcp_wait", "stepId": "parse", "reason": "right profile?"}
            )
            waited = time.monotonic() - started
            reviewer.join(30)
            assert not reviewer.errors, reviewer.errors
            return result, waited

    result, waited = run(ask())
    assert not result.is_error, result
    decided = result.structured_content
    assert decided["status"] == "decided" and decided["decision"] == "rejected"
    assert decided["note"] == "wrong profile" and decided["decidedBy"] == "user:alice"
    assert waited >= 4  # it really waited for the person


def test_the_ticket_flow_waits_for_a_reviewer_on_2025_11_25(server):
    """mode="legacy": the first call answers at once with a ticket (waitSeconds=0); the host passes
    the ticket back and that call waits for the reviewer's decision on the gate panel."""
    cluster = server["cluster"]

    async def ask():
        async with client(server["url"], server["owner"], "legacy") as c:
            assert c.protocol_version == "2025-11-25"
            await c.call_tool("start_run", {"workflow": LINEAR_WORKFLOW, "runId": "run_mcp_ticket"})
            args = {"runId": "run_mcp_ticket", "stepId": "parse", "checkpoint": "profile-ok"}
            first = (await c.call_tool("request_decision", {**args, "waitSeconds": 0})).structured_content
            assert first["status"] == "pending" and first["ticket"] >= 1
            reviewer = in_background(
                decide_on_the_gate_panel,
                cluster,
                server["session"],
                "run_mcp_ticket",
                "parse",
                after=3,
                decision="approved",
                note="looks right",
            )
            result = await c.call_tool("request_decision", {**args, "ticket": first["ticket"]})
            reviewer.join(30)
            assert not reviewer.errors, reviewer.errors
            return result.structured_content

    decided = run(ask())
    assert decided["status"] == "decided" and decided["decision"] == "approved"
    assert decided["note"] == "looks right" and decided["checkpoint"] == "profile-ok"


def test_nobody_decides_nothing_is_decided(server):
    """The wait runs out: still pending (2025-11-25) / still "input required" (2026-07-28, asked by
    hand), and no decision was recorded for the reviewer."""

    async def ask():
        async with client(server["url"], server["owner"], "legacy") as c:
            await c.call_tool("start_run", {"workflow": LINEAR_WORKFLOW, "runId": "run_mcp_nobody"})
            args = {"runId": "run_mcp_nobody", "stepId": "parse", "waitSeconds": 1}
            started = time.monotonic()
            legacy = (await c.call_tool("request_decision", args)).structured_content
            held = time.monotonic() - started
        async with client(server["url"], server["owner"], "auto") as c:
            modern = await c.session.call_tool("request_decision", args, allow_input_required=True)
        return legacy, held, modern

    legacy, held, modern = run(ask())
    assert legacy["status"] == "pending" and legacy["decision"] is None and held >= 1
    assert isinstance(modern, InputRequiredResult)
    events = httpx.get(
        server["cluster"].url(0, "/api/runs/run_mcp_nobody/events"),
        headers={"Authorization": f"Bearer {server['owner']}"},
        timeout=30,
    ).json()["events"]
    assert [e["event"]["type"] for e in events] == ["human_gate_requested"]


def test_the_integrations_recipe_runs(server, monkeypatch, capsys):
    """docs/integrations.md's MCP recipe, exactly as written, against the live server; a reviewer
    decides on the gate panel while it waits."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text()
    recipe = doc.split("<!-- recipe: mcp-token -->", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    cluster, token = server["cluster"], server["owner"]
    started = httpx.post(
        cluster.url(0, "/api/runs"),
        headers={"Authorization": f"Bearer {token}"},
        json={"workflow": LINEAR_WORKFLOW, "runId": "run_mcp_recipe"},
        timeout=30,
    )
    assert started.status_code in (200, 201), started.text
    monkeypatch.setenv("WORKBENCH_URL", cluster.url(0, ""))
    monkeypatch.setenv("WORKBENCH_TOKEN", token)
    monkeypatch.setenv("RUN_ID", "run_mcp_recipe")
    reviewer = in_background(
        decide_on_the_gate_panel,
        cluster,
        server["session"],
        "run_mcp_recipe",
        "parse",
        after=3,
        decision="approved",
        note="ship it",
    )
    namespace: dict = {"__name__": "recipe"}
    exec(compile(recipe, "docs/integrations.md", "exec"), namespace)
    reviewer.join(30)
    assert not reviewer.errors, reviewer.errors
    assert namespace["decision"]["decision"] == "approved" and namespace["decision"]["note"] == "ship it"
    printed = capsys.readouterr().out
    assert "run_mcp_recipe" in printed and "approved ship it by user:alice" in printed
