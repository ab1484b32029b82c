"""The outsider matrix for the MCP endpoint (/api/mcp, served by the project's ASGI application
in this process), generated from the MCP server's own tool registry: for every tool that names a
run, another workspace's token gets exactly the answer a missing run gets; a read-only token's
writes and an anonymous caller's calls are refused; nothing changes."""

from __future__ import annotations

import json
import re

import pytest
import pytest_asyncio
from channels.db import database_sync_to_async

from tests.security.world import (
    CANARY,
    DATASET_ID,
    EXPERIMENT_ID,
    ITEM_ID,
    MISSING_DATASET_ID,
    MISSING_EXPERIMENT_ID,
    MISSING_QUEUE_ID,
    MISSING_RUN,
    QUEUE_ID,
    VICTIM_RUN,
    build_world,
    fingerprint,
)

pytest.importorskip("mcp")

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

# Tool arguments that name an object of one workspace (filled with the victim's and a missing one).
SCOPED_ARGS = {"runId", "datasetId", "experimentId", "queueId"}
# The victim's object and a missing one of the same length, per scoped argument.
SCOPED_VALUES = {
    "runId": (VICTIM_RUN, MISSING_RUN),
    "datasetId": (DATASET_ID, MISSING_DATASET_ID),
    "experimentId": (EXPERIMENT_ID, MISSING_EXPERIMENT_ID),
    "queueId": (QUEUE_ID, MISSING_QUEUE_ID),
}
# Other arguments, and the values the matrix sends (valid, so a missing check would let a write through).
OTHER_ARGS = {
    "name": "n",
    "stepId": "review",
    "gate": "PAUSE_BEFORE",
    "decision": "approved",
    "artifactKey": "notes",
    "typeId": "json",
    "data": {"a": 1},
    "reason": "why",
    "ticket": 1,
    "note": "n",
    "itemId": ITEM_ID,  # an item of the victim's queue (only reachable through its queueId)
    "scores": {"ok": True},
    "items": [{"runId": VICTIM_RUN}],
    "scoreConfigs": [{"name": "ok", "dataType": "BOOLEAN"}],
}
# Arguments that name no existing object of a workspace (listed so a new argument is noticed).
UNSCOPED_ARGS = {
    "workflow",
    "bundle",
    "status",
    "limit",
    "tags",
    "metadata",
    "subject",
    "mode",
    "fromSeq",
    "redact",
}
UNSCOPED_ARGS |= {"instructions", "reviewsPerItem", "reservationSeconds", "blind", "comment"}
UNSCOPED_ARGS |= {"fromStepId", "overlay", "newRunId", "idempotencyKey", "checkpoint", "waitSeconds"}
# evals: dataset items and experiments (their sources name runs, checked by the actions workspace first)
UNSCOPED_ARGS |= {"description", "items", "fromRuns", "fromGates", "fromEvent", "asOf", "change"}
UNSCOPED_ARGS |= {"baselineId", "evaluator"}
# prompts: a label or a version number of the prompt that `name` names in the caller's own workspace
UNSCOPED_ARGS |= {"label", "version"}
# Tools whose run id names the run they create, in the caller's own workspace (ids are per workspace).
CREATES_RUN = {"start_run"}


async def _call(http, token: str | None, name: str, arguments: dict) -> dict:
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-06-18",
    }
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    response = await http.post("/api/mcp", headers=headers, content=json.dumps(body))
    assert response.status_code < 500, response.text
    return response.json()


def _text(answer: dict) -> str:
    result = answer.get("result") or {}
    return json.dumps(result, sort_keys=True) if result else json.dumps(answer.get("error"), sort_keys=True)


def _is_error(answer: dict) -> bool:
    return "error" in answer or bool((answer.get("result") or {}).get("isError"))


@pytest_asyncio.fixture
async def mcp_http():
    import httpx

    from runs.mcp.asgi import endpoint
    from workbench.asgi import application

    await endpoint.start()
    transport = httpx.ASGITransport(app=application, client=("127.0.0.1", 40000))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            yield http
    finally:
        await endpoint.stop()


async def _tools() -> list:
    from runs.mcp.server import get_server

    return await get_server().list_tools()


def _blank(text: str, names: list[str], which: int) -> str:
    """The answer with the scoped ids it was asked about (victim's 0, missing 1) blanked out."""
    for name in names:
        text = text.replace(SCOPED_VALUES[name][which], "<ID>")
    return text


async def test_every_tool_argument_is_classified():
    known = SCOPED_ARGS | set(OTHER_ARGS) | UNSCOPED_ARGS
    unknown = {
        f"{tool.name}.{arg}" for tool in await _tools() for arg in tool.input_schema.get("properties", {})
    } - {f"{t}.{a}" for t in [tool.name for tool in await _tools()] for a in known}
    assert not unknown, (
        f"MCP tool arguments {sorted(unknown)} are unknown to {__name__}: add them to SCOPED_ARGS "
        "(they name a workspace's object), OTHER_ARGS or UNSCOPED_ARGS"
    )


async def test_mcp_tools_refuse_outsiders_like_missing_runs(
    mcp_http, workspace, other_workspace, alice, vera, charlie, workflow
):
    world = await database_sync_to_async(build_world)(
        workspace, other_workspace, alice, vera, charlie, workflow
    )
    before = await database_sync_to_async(fingerprint)(world.workspace)
    failures, scoped = [], 0
    for tool in await _tools():
        props = tool.input_schema.get("properties", {})
        if not SCOPED_ARGS & set(props) or tool.name in CREATES_RUN:
            continue
        scoped += 1
        required = set(tool.input_schema.get("required", []))
        args = {k: v for k, v in OTHER_ARGS.items() if k in required}
        names = [k for k in SCOPED_VALUES if k in props]
        theirs = {**args, **{k: SCOPED_VALUES[k][0] for k in names}}
        gone = {**args, **{k: SCOPED_VALUES[k][1] for k in names}}
        foreign = await _call(mcp_http, world.outsider_token, tool.name, theirs)
        missing = await _call(mcp_http, world.outsider_token, tool.name, gone)

        if CANARY in json.dumps(foreign) or not _is_error(foreign):
            failures.append(f"{tool.name}: the outsider got an answer: {_text(foreign)[:300]}")
        elif _blank(_text(foreign), names, 0) != _blank(_text(missing), names, 1):
            failures.append(
                f"{tool.name}: victim and missing differ:\n  {_text(foreign)}\n  {_text(missing)}"
            )
        anonymous = await _call(mcp_http, None, tool.name, theirs)
        if not _is_error(anonymous) or "UNAUTHENTICATED" not in _text(anonymous):
            failures.append(f"{tool.name}: anonymous: {_text(anonymous)[:300]}")
        if not (tool.annotations and tool.annotations.read_only_hint):
            reader = await _call(mcp_http, world.read_token, tool.name, theirs)
            if not _is_error(reader) or not re.search(r"FORBIDDEN", _text(reader)):
                failures.append(f"{tool.name}: a read-only token wrote: {_text(reader)[:300]}")
    assert scoped >= 5, "the registry read no run tools: the generator is broken"
    assert not failures, "\n".join(failures)
    assert await database_sync_to_async(fingerprint)(world.workspace) == before, "the victim's data changed"


async def test_the_control_an_owner_token_reads_the_run(
    mcp_http, workspace, other_workspace, alice, vera, charlie, workflow
):
    from accounts.tokens import create_token

    world = await database_sync_to_async(build_world)(
        workspace, other_workspace, alice, vera, charlie, workflow
    )
    owner = await database_sync_to_async(create_token)(workspace=world.workspace, name="o", scopes=["read"])
    answer = await _call(mcp_http, owner.secret, "get_run", {"runId": VICTIM_RUN})
    assert not _is_error(answer) and CANARY in json.dumps(answer)
