"""A waiting gate answered from an MCP client (issue 49): the official SDK client of protocol
2026-07-28 gets an "input required" round carrying an elicitation form, its elicitation callback
answers it, and the decision is recorded under the OAuth user's identity with channel "mcp"."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.conftest import LINEAR_WORKFLOW
from tests.live.cluster import Cluster

pytest.importorskip("mcp")

import httpx2  # noqa: E402
from mcp.client.client import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp_types import ElicitResult  # noqa: E402

SETUP = r"""
import json
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application
from accounts.oauth import workspace_scope
from runs import actions
from runs.actions.workspaces import add_member, get_or_create_workspace
from runs.engine import commands as c
ws = get_or_create_workspace("acme", name="Acme")
actions.do_start_run(workspace=ws, workflow=__WORKFLOW__, run_id="run_rev2", actor="user:alice")
for run_id in ("run_rev", "run_rev2"):
    actions.do_commands(workspace=ws, run_id=run_id, commands=[c.BeginStep(step_id="parse"), c.CompleteStep(step_id="parse")])
rita = get_user_model().objects.create_user("rita", email="rita@example.com")
add_member(ws, rita, "reviewer")
app = Application.objects.create(name="host", client_type=Application.CLIENT_PUBLIC,
    authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE, redirect_uris="http://127.0.0.1:9/callback")
AccessToken.objects.create(user=rita, application=app, token="rita-oauth-token-0123456789",
    expires=timezone.now() + timedelta(hours=1), scope="read review " + workspace_scope(ws), resource=[])
"""

DECISIONS = r"""
import json
from runs.models import Event, GateDecisionMeta
out = []
for e in Event.objects.filter(type="human_gate_resolved").select_related("run").order_by("run__run_id"):
    meta = GateDecisionMeta.objects.filter(run=e.run, event_id=e.event_id).values_list("metadata", flat=True).first()
    out.append([e.run.run_id, e.actor, e.data["decision"], e.data.get("note"), meta])
print("DECISIONS " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def server():
    with Cluster(database="sqlite", servers=1) as cluster:
        cluster.seed(workflow=LINEAR_WORKFLOW, run_id="run_rev")
        cluster.python(SETUP.replace("__WORKFLOW__", repr(LINEAR_WORKFLOW)))
        yield cluster


def _decisions(cluster) -> list:
    line = next(x for x in cluster.python(DECISIONS).splitlines() if x.startswith("DECISIONS "))
    return json.loads(line[10:])


def _client(cluster, mode: str, callback) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": "Bearer rita-oauth-token-0123456789"}, timeout=60)
    return Client(
        streamable_http_client(cluster.url(0, "/api/mcp"), http_client=http),
        mode=mode,
        elicitation_callback=callback,
    )


ARGS = {"runId": "run_rev", "stepId": "review", "gate": "PAUSE_BEFORE"}


def test_an_input_required_round_decides_as_the_oauth_user(server):
    asked: list = []

    async def answer(ctx, params):
        asked.append(params)
        return ElicitResult(action="accept", content={"decision": "approved", "note": "looks right"})

    async def scenario():
        async with _client(server, "auto", answer) as c:
            return await c.call_tool("review_gate", ARGS)

    result = asyncio.run(scenario())
    assert not result.is_error, result
    assert result.structured_content["status"] == "decided"
    (params,) = asked
    assert "review" in params.message and params.requested_schema["properties"]["decision"]["enum"] == [
        "approved",
        "rejected",
    ]
    assert _decisions(server) == [
        ["run_rev", "user:rita", "approved", "looks right", {"workbench.channel": "mcp"}]
    ]

    async def again():  # the gate is decided: nothing to ask, nothing decided
        async with _client(server, "auto", answer) as c:
            return await c.call_tool("review_gate", ARGS)

    refused = asyncio.run(again())
    assert refused.is_error and "INVALID_STATE_TRANSITION" in refused.content[0].text
    assert len(asked) == 1 and len(_decisions(server)) == 1


def test_a_declined_form_decides_nothing(server):
    async def decline(ctx, params):
        return ElicitResult(action="decline")

    async def scenario():
        async with _client(server, "auto", decline) as c:
            return await c.call_tool("review_gate", {**ARGS, "runId": "run_rev2"})

    result = asyncio.run(scenario())
    assert result.structured_content["status"] == "not decided"
    assert [d[0] for d in _decisions(server)] == ["run_rev"]


def test_a_2025_11_25_client(server):
    """The endpoint is stateless (JSON responses): a 2025-11-25 session has no stream the server
    could send ``elicitation/create`` on, so the tool says so and decides nothing."""

    async def answer(ctx, params):
        return ElicitResult(action="accept", content={"decision": "rejected"})

    async def scenario():
        async with _client(server, "legacy", answer) as c:
            return await c.call_tool("review_gate", {**ARGS, "runId": "run_rev2"})

    result = asyncio.run(scenario())
    assert result.is_error and "ELICITATION_UNAVAILABLE" in result.content[0].text
    assert "NoBackChannelError" in result.content[0].text
    assert [d[0] for d in _decisions(server)] == ["run_rev"]
