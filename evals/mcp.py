"""MCP tools for datasets and experiments (added to the one MCP server by ``add_tools``; see
``runs.mcp.register_tool_module``). Rights from the one table, reads workspace first: another
workspace's dataset or experiment is reported exactly like a missing one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from accounts.principals import Principal
from evals import actions, presenters, selectors
from evals.api import items_for
from evals.runner import enqueue
from runs.actions import ActionError
from runs.actions.permissions import Action
from runs.mcp import Forwarder
from runs.mcp.operations import Refused, authorized_caller
from runs.selectors.runs import RunNotFound

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
WRITES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
DatasetId = Annotated[str, Field(min_length=1, max_length=200, description="A dataset id of your workspace.")]
ExperimentId = Annotated[
    str, Field(min_length=1, max_length=200, description="An experiment id of your workspace.")
]


def _guarded(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except selectors.EvalNotFound as exc:
        raise Refused(exc.code, exc.what) from None
    except ActionError as exc:
        where = f" (at {exc.path})" if exc.path else ""
        raise Refused(exc.code, exc.message + where) from None
    except RunNotFound as exc:
        raise Refused("UNKNOWN_RUN", f"no run {exc.args[0]!r}" if exc.args else "no such run") from None


# operations (plain functions over the caller's principal) --------------------------------------


def create_dataset(principal: Principal | None, *, name: str, description: str | None = None) -> dict:
    caller = authorized_caller(principal, Action.EDIT_DATASET)
    dataset = _guarded(
        actions.do_create_dataset,
        workspace=caller.workspace,
        name=name,
        description=description,
        actor=caller.actor,
    )
    return presenters.dataset_json(dataset)


def add_dataset_items(principal: Principal | None, *, dataset_id: str, **sources: Any) -> dict:
    caller = authorized_caller(principal, Action.EDIT_DATASET)

    def add() -> dict:
        dataset = selectors.get_dataset(caller.workspace, dataset_id)
        named = {
            "items": sources.get("items"),
            "fromRuns": sources.get("from_runs"),
            "fromGates": sources.get("from_gates"),
            "fromEvent": sources.get("from_event"),
        }
        added, revision = actions.do_add_items(
            dataset=dataset, items=items_for(caller, named), actor=caller.actor
        )
        return {"added": added, "revision": revision}

    return _guarded(add)


def list_dataset_items(principal: Principal | None, *, dataset_id: str, as_of: str | None = None) -> dict:
    caller = authorized_caller(principal, Action.VIEW_DATASET)

    def read() -> dict:
        dataset = selectors.get_dataset(caller.workspace, dataset_id)
        revision = actions.resolve_as_of(dataset, as_of)
        return {
            "datasetId": dataset.public_id,
            "revision": revision,
            "items": selectors.items_at(dataset, revision),
        }

    return _guarded(read)


def create_experiment(principal: Principal | None, *, dataset_id: str, name: str, **options: Any) -> dict:
    caller = authorized_caller(principal, Action.RUN_EXPERIMENT)

    def create() -> dict:
        dataset = selectors.get_dataset(caller.workspace, dataset_id)
        baseline = None
        if options.get("baseline_id"):
            baseline = selectors.get_experiment(caller.workspace, options["baseline_id"])
        experiment = actions.do_create_experiment(
            workspace=caller.workspace,
            dataset=dataset,
            name=name,
            change=options.get("change"),
            as_of=options.get("as_of"),
            baseline=baseline,
            evaluator=options.get("evaluator"),
            from_step_id=options.get("from_step_id"),
            actor=caller.actor,
        )
        enqueue(experiment)
        return presenters.experiment_json(experiment, selectors.experiment_items(experiment))

    return _guarded(create)


def get_experiment(principal: Principal | None, *, experiment_id: str) -> dict:
    caller = authorized_caller(principal, Action.VIEW_DATASET)

    def read() -> dict:
        experiment = selectors.get_experiment(caller.workspace, experiment_id)
        return presenters.experiment_json(experiment, selectors.experiment_items(experiment))

    return _guarded(read)


def rescore_experiment(
    principal: Principal | None, *, experiment_id: str, evaluator: dict | None = None
) -> dict:
    caller = authorized_caller(principal, Action.RUN_EXPERIMENT)

    def rescore() -> dict:
        experiment = selectors.get_experiment(caller.workspace, experiment_id)
        experiment = actions.do_rescore_experiment(experiment, evaluator=evaluator, actor=caller.actor)
        return presenters.experiment_json(experiment, selectors.experiment_items(experiment))

    return _guarded(rescore)


# structured outputs ---------------------------------------------------------------------------


class DatasetResult(BaseModel):
    id: str
    name: str
    description: str
    inputSchema: dict[str, Any] | None
    expectedSchema: dict[str, Any] | None
    revision: int
    createdBy: str
    createdAt: str


class ItemsAdded(BaseModel):
    added: int
    revision: int


class DatasetItems(BaseModel):
    datasetId: str
    revision: int
    items: list[dict[str, Any]]


class ExperimentResult(BaseModel):
    id: str
    name: str
    datasetId: str
    asOf: int
    status: str
    change: dict[str, Any]
    fromStepId: str
    evaluator: dict[str, Any]
    baselineId: str | None
    summary: dict[str, Any]
    items: list[dict[str, Any]]
    rescored: int
    createdAt: str
    finishedAt: str | None


JSONObject = dict[str, Any] | None


_forward = (
    Forwarder()
)  # the server's forwarder (a global, so the tools' ``locals()`` hold only their arguments)


def add_tools(mcp: Any, forward: Callable[..., Any]) -> dict[str, str]:
    """Register the tools on the server; returns each tool's scope (for discovery)."""
    _forward.bind(forward)

    @mcp.tool(name="create_dataset", title="Create a dataset", annotations=WRITES)
    async def create_dataset_tool(
        ctx: Context,
        name: Annotated[str, Field(min_length=1, max_length=200)],
        description: str | None = None,
    ) -> DatasetResult:
        """Create a dataset in your workspace (needs write or review)."""
        return await _forward(ctx, create_dataset, DatasetResult, locals())

    @mcp.tool(name="add_dataset_items", title="Add dataset items", annotations=WRITES)
    async def add_dataset_items_tool(
        ctx: Context,
        datasetId: DatasetId,
        items: Annotated[
            list[dict[str, Any]] | None, Field(description="[{input, expected?, label?, note?}]")
        ] = None,
        fromRuns: Annotated[JSONObject, Field(description='{"runIds": [...], "stepId"?}')] = None,
        fromGates: Annotated[JSONObject, Field(description='{"stepId", "workflowId"?, "limit"?}')] = None,
        fromEvent: Annotated[JSONObject, Field(description='{"runId", "seq"}')] = None,
    ) -> ItemsAdded:
        """Add items to a dataset: given ones, one per run, one per decided gate of a step, or one event."""
        return await _forward(ctx, add_dataset_items, ItemsAdded, locals())

    @mcp.tool(name="list_dataset_items", title="List dataset items", annotations=READ_ONLY)
    async def list_dataset_items_tool(
        ctx: Context,
        datasetId: DatasetId,
        asOf: Annotated[str | None, Field(description="A revision number or an ISO 8601 time.")] = None,
    ) -> DatasetItems:
        """A dataset's items as of a revision or time (the same answer forever)."""
        return await _forward(ctx, list_dataset_items, DatasetItems, locals())

    @mcp.tool(name="create_experiment", title="Run an experiment", annotations=WRITES)
    async def create_experiment_tool(
        ctx: Context,
        datasetId: DatasetId,
        name: Annotated[str, Field(min_length=1, max_length=200)],
        change: Annotated[
            JSONObject,
            Field(
                description='{} (replay), {"configurable": {...}} and/or {"prompt": {"name", "version"}} (branch)'
            ),
        ] = None,
        asOf: Annotated[str | None, Field(description="A revision number or an ISO 8601 time.")] = None,
        baselineId: Annotated[str | None, Field(max_length=200)] = None,
        evaluator: Annotated[
            JSONObject, Field(description='{"kind": "exact" | "jsonpath" | "function", ...}')
        ] = None,
        fromStepId: Annotated[str | None, Field(max_length=200)] = None,
    ) -> ExperimentResult:
        """Fork every item's source run with a change (or replay it), score the outputs (needs write)."""
        return await _forward(ctx, create_experiment, ExperimentResult, locals())

    @mcp.tool(name="get_experiment", title="Get an experiment", annotations=READ_ONLY)
    async def get_experiment_tool(ctx: Context, experimentId: ExperimentId) -> ExperimentResult:
        """An experiment's status, items (score, calls, cache hits, cost delta) and summary."""
        return await _forward(ctx, get_experiment, ExperimentResult, locals())

    @mcp.tool(name="rescore_experiment", title="Rescore an experiment", annotations=WRITES)
    async def rescore_experiment_tool(
        ctx: Context, experimentId: ExperimentId, evaluator: JSONObject = None
    ) -> ExperimentResult:
        """Score an experiment's stored outputs again: no fork, no task model call."""
        return await _forward(ctx, rescore_experiment, ExperimentResult, locals())

    return {
        "create_dataset": "write or review",
        "add_dataset_items": "write or review",
        "list_dataset_items": "read",
        "create_experiment": "write",
        "get_experiment": "read",
        "rescore_experiment": "write",
    }
