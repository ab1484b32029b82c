"""The MCP tool get_prompt: the same version REST answers, read scope, another workspace's prompt
reported like a missing one. (The tool's wiring over HTTP is the MCP suite's: tests/mcp.)"""

from __future__ import annotations

import pytest

from accounts.principals import Principal
from runs.actions.permissions import ROLE_SCOPES
from runs.actions.prompts import do_move_label, do_save_prompt_version
from runs.mcp import operations as ops
from runs.mcp.server import TOOL_SCOPES, tool_catalog


def test_get_prompt_by_label_and_version(workspace, other_workspace, alice):
    owner = ROLE_SCOPES["owner"]
    for text in ("one {{x}}", "two {{x}}"):
        do_save_prompt_version(workspace, name="a/b", body=text, scopes=owner, user=alice)
    do_move_label(workspace, name="a/b", label="production", version=1, scopes=owner, user=alice)
    reader = Principal(workspace=workspace, actor="token:r", scopes=frozenset({"read"}))
    assert ops.get_prompt(reader, name="a/b")["body"] == "one {{x}}"
    assert ops.get_prompt(reader, name="a/b", label="latest")["version"] == 2
    assert ops.get_prompt(reader, name="a/b", version=1)["variables"] == ["x"]
    outsider = Principal(workspace=other_workspace, actor="token:o", scopes=frozenset({"read"}))
    with pytest.raises(ops.Refused) as info:
        ops.get_prompt(outsider, name="a/b")
    assert info.value.code == "NOT_FOUND"
    with pytest.raises(ops.Refused) as info:
        ops.get_prompt(None, name="a/b")
    assert info.value.code == "UNAUTHENTICATED"
    with pytest.raises(ops.Refused):
        ops.get_prompt(reader, name="a/b", label="production", version=1)


def test_the_tool_is_listed_as_read_only():
    assert TOOL_SCOPES["get_prompt"] == "read"
    assert "get_prompt" in {tool["name"] for tool in tool_catalog()}
