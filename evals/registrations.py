"""What the evals app provides to runs, registered once from ``EvalsConfig.ready`` (runs never
imports evals: it calls what is registered here)."""

from evals.runner import refresh_waiting_item
from evals.selectors import failed_experiment_concern
from runs.actions.prompts import register_promotion_check
from runs.background.periodic import register
from runs.execution.replay import register_fork_finished
from runs.mcp import register_tool_module


def register_all() -> None:
    # The MCP server imports evals.mcp when it is built.
    register_tool_module("evals.mcp")
    # a promotion whose experiment failed on every item is not approved in one click
    register_promotion_check(failed_experiment_concern)
    # experiments whose task row is gone end failed with the reason (`manage.py worker`)
    register("experiments", "evals.runner.recover_experiments", 30)
    # an item waiting at a gate records what its fork did once a person decided
    register_fork_finished(refresh_waiting_item)
