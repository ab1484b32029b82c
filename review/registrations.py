"""What the review app provides to runs, registered once from ``ReviewConfig.ready`` (runs never
imports review: it calls what is registered here)."""

from review.listeners import add_by_rules
from runs.actions.notify import register_listener
from runs.mcp import register_tool_module


def register_all() -> None:
    # The MCP server imports review.mcp when it is built.
    register_tool_module("review.mcp")
    # rules add runs to queues after each commit
    register_listener(add_by_rules)
