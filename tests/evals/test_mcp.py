"""The MCP tools of datasets and experiments: registered on the one server, same rules as REST."""

from __future__ import annotations

import pytest

from accounts.principals import principal_for_token
from evals import mcp as tools
from runs.mcp.operations import Refused


def _principal(workspace, scopes):
    from accounts.tokens import authenticate_token, create_token

    secret = create_token(workspace=workspace, name="t", scopes=scopes).secret
    return principal_for_token(authenticate_token(secret))


@pytest.mark.django_db
def test_tools_create_fill_and_read_a_dataset(workspace, other_workspace, recorded):
    owner = _principal(workspace, ["read", "write"])
    reader = _principal(workspace, ["read"])
    outsider = _principal(other_workspace, ["read", "write"])
    ds = tools.create_dataset(owner, name="drafts")["id"]
    assert tools.add_dataset_items(owner, dataset_id=ds, from_gates={"stepId": "draft"}) == {
        "added": 3,
        "revision": 1,
    }
    assert len(tools.list_dataset_items(reader, dataset_id=ds)["items"]) == 3
    assert tools.list_dataset_items(reader, dataset_id=ds, as_of="0")["items"] == []
    with pytest.raises(Refused) as info:
        tools.add_dataset_items(reader, dataset_id=ds, items=[{"input": 1}])
    assert info.value.code == "FORBIDDEN"
    with pytest.raises(Refused) as foreign:
        tools.list_dataset_items(outsider, dataset_id=ds)
    with pytest.raises(Refused) as missing:
        tools.list_dataset_items(outsider, dataset_id="ds_nope")
    assert foreign.value.code == missing.value.code == "DATASET_NOT_FOUND"
    with pytest.raises(Refused) as unauthenticated:
        tools.get_experiment(None, experiment_id="exp_x")
    assert unauthenticated.value.code == "UNAUTHENTICATED"


@pytest.mark.asyncio
async def test_the_server_lists_the_tools():
    from runs.mcp.server import TOOL_SCOPES, get_server

    names = {tool.name for tool in await get_server().list_tools()}
    assert {"create_dataset", "add_dataset_items", "list_dataset_items", "create_experiment"} <= names
    assert {"get_experiment", "rescore_experiment"} <= names
    assert TOOL_SCOPES["create_experiment"] == "write"
