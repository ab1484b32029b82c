"""REST for datasets and experiments (django-ninja routers on the one API, mounted by
:func:`register`): another workspace's dataset or experiment answers 404 like a missing one.

``POST /api/datasets``, ``GET /api/datasets``, ``GET /api/datasets/{id}``,
``POST /api/datasets/{id}/items`` (one of ``items``, ``fromRuns``, ``fromGates``, ``fromEvent``),
``GET /api/datasets/{id}/items?asOf=``, ``POST /api/datasets/{id}/items:delete``,
``POST /api/experiments``, ``GET /api/experiments``, ``GET /api/experiments/{id}``,
``POST /api/experiments/{id}/rescore``, ``POST /api/experiments/{id}/cancel``.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI, Query, Router, Schema
from ninja.responses import Status
from pydantic import Field

from evals import actions, presenters, selectors
from evals.models import Dataset
from evals.runner import enqueue
from runs.actions import ActionError
from runs.actions.permissions import Action
from runs.api.errors import ApiError
from runs.api.paging import NEXT_DOC, PageQuery, newest
from runs.api.responses import require
from runs.api.schemas import ErrorOut
from runs.protocol.canonical import parse_json
from runs.protocol.errors import ErrorCode

datasets_router = Router(tags=["datasets and experiments"])
experiments_router = Router(tags=["datasets and experiments"])

ERRORS = {
    400: ErrorOut,
    401: ErrorOut,
    403: ErrorOut,
    404: ErrorOut,
    409: ErrorOut,
    413: ErrorOut,
    429: ErrorOut,
}
SOURCES = ("items", "fromRuns", "fromGates", "fromEvent")


def _body(request: HttpRequest, fields: frozenset[str]) -> dict[str, Any]:
    data = parse_json(request.body) if request.body else {}
    if not isinstance(data, dict):
        raise ApiError(ErrorCode.INVALID_INPUT, "the body must be a JSON object")
    unknown = set(data) - fields
    if unknown:
        raise ApiError(ErrorCode.INVALID_INPUT, f"unknown field(s): {', '.join(sorted(unknown))}")
    return data


def _request_body(schema: str) -> dict:
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}},
        }
    }


class DatasetIn(Schema):
    name: str = Field(description="Unique in the workspace.")
    description: str | None = None
    inputSchema: dict[str, Any] | None = Field(
        default=None, description="A JSON Schema every item's input meets."
    )
    expectedSchema: dict[str, Any] | None = Field(default=None, description="... and every expected value.")


class DatasetOut(Schema):
    id: str
    name: str
    description: str
    inputSchema: dict[str, Any] | None
    expectedSchema: dict[str, Any] | None
    revision: int = Field(description="The latest revision (0: nothing added yet).")
    createdBy: str
    createdAt: str


class DatasetList(Schema):
    datasets: list[DatasetOut]


class ItemsIn(Schema):
    items: list[dict[str, Any]] | None = Field(
        default=None,
        description="[{id?, input, expected?, label?, note?, metadata?, source?: {runId, eventId?, seq?}}]",
    )
    fromRuns: dict[str, Any] | None = Field(default=None, description='{"runIds": [...], "stepId"?}')
    fromGates: dict[str, Any] | None = Field(
        default=None, description='{"stepId", "workflowId"?, "limit"?}: one item per decided gate of the step'
    )
    fromEvent: dict[str, Any] | None = Field(
        default=None, description='{"runId", "seq"}: "Add to dataset" on a timeline'
    )


class AddedOut(Schema):
    added: int = Field(description="Items appended (a source the dataset already holds is not added twice).")
    revision: int


class DeleteIn(Schema):
    itemIds: list[str]


class RemovedOut(Schema):
    removed: int
    revision: int


class ItemsQuery(Schema):
    asOf: str | None = Field(
        default=None, description="A revision number or an ISO 8601 time; default: the latest."
    )


class ItemsOut(Schema):
    datasetId: str
    revision: int
    items: list[dict[str, Any]] = Field(
        description="[{id, input, expected, label?, note?, metadata?, source: {runId, eventId, seq}, revision}]"
    )


def _dataset(request: HttpRequest, dataset_id: str, action: Action) -> tuple[Any, Dataset]:
    caller = require(request, action)
    return caller, selectors.get_dataset(caller.workspace, dataset_id)


@datasets_router.get(
    "", response={200: DatasetList, **ERRORS}, summary="List datasets, newest first", description=NEXT_DOC
)
def list_datasets(request: HttpRequest, response: HttpResponse, page: Query[PageQuery]):
    caller = require(request, Action.VIEW_DATASET)
    rows = newest(request, response, selectors.datasets_of(caller.workspace), page)
    return {"datasets": [presenters.dataset_json(d) for d in rows]}


@datasets_router.post(
    "",
    response={201: DatasetOut, **ERRORS},
    summary="Create a dataset",
    openapi_extra=_request_body("DatasetIn"),
)
def create_dataset(request: HttpRequest):
    caller = require(request, Action.EDIT_DATASET)
    data = _body(request, frozenset({"name", "description", "inputSchema", "expectedSchema"}))
    dataset = actions.do_create_dataset(
        workspace=caller.workspace,
        name=data.get("name"),
        description=data.get("description"),
        input_schema=data.get("inputSchema"),
        expected_schema=data.get("expectedSchema"),
        actor=caller.actor,
    )
    return Status(201, presenters.dataset_json(dataset))


@datasets_router.get("/{dataset_id}", response={200: DatasetOut, **ERRORS}, summary="Get a dataset")
def get_dataset(request: HttpRequest, dataset_id: str):
    return presenters.dataset_json(_dataset(request, dataset_id, Action.VIEW_DATASET)[1])


def items_for(caller: Any, data: dict[str, Any]) -> list[Any]:
    """The items a request names: exactly one of items, fromRuns, fromGates, fromEvent."""
    named = [key for key in SOURCES if data.get(key) is not None]
    if len(named) != 1:
        raise ActionError(ErrorCode.INVALID_INPUT, f"give exactly one of {', '.join(SOURCES)}")
    key = named[0]
    value = data[key]
    if key == "items":
        return value  # do_add_items says what is wrong with anything else
    if not isinstance(value, dict):
        raise ActionError(ErrorCode.INVALID_INPUT, f"{key} must be an object", key)
    if key == "fromRuns":
        return actions.items_from_runs(caller.workspace, value.get("runIds"), value.get("stepId"))
    if key == "fromGates":
        return actions.items_from_gates(
            caller.workspace,
            value.get("stepId"),
            workflow_id=value.get("workflowId"),
            limit=value.get("limit"),
        )
    return [actions.item_from_event(caller.workspace, value.get("runId"), value.get("seq"))]


@datasets_router.post(
    "/{dataset_id}/items",
    response={200: AddedOut, **ERRORS},
    summary="Add items: given, from runs, from decided gates or from one event",
    openapi_extra=_request_body("ItemsIn"),
)
def add_dataset_items(request: HttpRequest, dataset_id: str):
    caller, dataset = _dataset(request, dataset_id, Action.EDIT_DATASET)
    data = _body(request, frozenset(SOURCES))
    added, revision = actions.do_add_items(dataset=dataset, items=items_for(caller, data), actor=caller.actor)
    return {"added": added, "revision": revision}


@datasets_router.post(
    "/{dataset_id}/items:delete",
    response={200: RemovedOut, **ERRORS},
    summary="Delete items (a new revision; older revisions keep them)",
    openapi_extra=_request_body("DeleteIn"),
)
def delete_dataset_items(request: HttpRequest, dataset_id: str):
    caller, dataset = _dataset(request, dataset_id, Action.EDIT_DATASET)
    data = _body(request, frozenset({"itemIds"}))
    removed, revision = actions.do_delete_items(
        dataset=dataset, item_ids=data.get("itemIds"), actor=caller.actor
    )
    return {"removed": removed, "revision": revision}


@datasets_router.get(
    "/{dataset_id}/items", response={200: ItemsOut, **ERRORS}, summary="The items as of a revision or time"
)
def list_dataset_items(request: HttpRequest, dataset_id: str, query: Query[ItemsQuery]):
    _, dataset = _dataset(request, dataset_id, Action.VIEW_DATASET)
    revision = actions.resolve_as_of(dataset, query.asOf)
    return {
        "datasetId": dataset.public_id,
        "revision": revision,
        "items": selectors.items_at(dataset, revision),
    }


# experiments ------------------------------------------------------------------------------------


class ExperimentIn(Schema):
    datasetId: str
    name: str
    asOf: str | int | None = Field(
        default=None, description="Revision or time of the dataset; default: latest."
    )
    change: dict[str, Any] | None = Field(
        default=None,
        description='{} (replay every item: cached answers), {"configurable": {...}} and/or '
        '{"prompt": {"name": ..., "version": N}} (branch: the step code gets that prompt version)',
    )
    fromStepId: str | None = Field(
        default=None,
        description="The first step the change affects (default: declared by the step code, else all).",
    )
    baselineId: str | None = Field(
        default=None, description="An experiment over the same dataset to compare with."
    )
    evaluator: dict[str, Any] | None = Field(
        default=None,
        description='{"kind": "exact"} (default), {"kind": "jsonpath", "paths": [...]}, {"kind": "function", "name"}, '
        '{"kind": "judge", "model", "prompt" (with {input}/{output}/{expected}), "version"?, "provider"?}',
    )


class ExperimentOut(Schema):
    id: str
    name: str
    datasetId: str
    asOf: int
    status: str = Field(description="pending, running, completed or failed")
    change: dict[str, Any]
    fromStepId: str
    evaluator: dict[str, Any]
    baselineId: str | None
    summary: dict[str, Any] = Field(
        description="n, providerCalls, cacheHits, cost, costDelta, meanScore {n, mean, low, high} ..."
    )
    error: str = Field(
        description="Why it failed, in words (CANCELLED: cancelled by <user>; WORKER_LOST: ...)"
    )
    progress: dict[str, int] = Field(description="Items: total, done, running, pending")
    items: list[dict[str, Any]] = Field(
        description="[{itemId, runId, status, score, providerCalls, cacheHits, tokens, cost, costDelta, latencyMs, firstDivergenceSeq}]"
    )
    rescored: int
    createdAt: str
    finishedAt: str | None


class ExperimentList(Schema):
    experiments: list[dict[str, Any]]


class RescoreIn(Schema):
    evaluator: dict[str, Any] | None = None


@experiments_router.post(
    "",
    response={201: ExperimentOut, **ERRORS},
    summary="Run an experiment: fork every item's source run, score the outputs",
    openapi_extra=_request_body("ExperimentIn"),
)
def create_experiment(request: HttpRequest):
    caller = require(request, Action.RUN_EXPERIMENT)
    data = _body(request, frozenset(ExperimentIn.model_fields))
    dataset_id = data.get("datasetId")
    if not isinstance(dataset_id, str):
        raise ApiError(ErrorCode.INVALID_INPUT, "datasetId must be a dataset's id")
    dataset = selectors.get_dataset(caller.workspace, dataset_id)
    baseline = None
    if data.get("baselineId") is not None:
        if not isinstance(data["baselineId"], str):
            raise ApiError(ErrorCode.INVALID_INPUT, "baselineId must be an experiment's id")
        baseline = selectors.get_experiment(caller.workspace, data["baselineId"])
    experiment = actions.do_create_experiment(
        workspace=caller.workspace,
        dataset=dataset,
        name=data.get("name"),
        change=data.get("change"),
        as_of=data.get("asOf"),
        baseline=baseline,
        evaluator=data.get("evaluator"),
        from_step_id=data.get("fromStepId"),
        actor=caller.actor,
    )
    enqueue(experiment)
    return Status(201, presenters.experiment_json(experiment, selectors.experiment_items(experiment)))


class ExperimentsQuery(PageQuery):
    dataset: str = Field(default="", description="Only the experiments on this dataset (its id, `ds_...`).")
    status: str = Field(default="", description="Only the experiments of this status.")


@experiments_router.get(
    "",
    response={200: ExperimentList, **ERRORS},
    summary="List experiments, newest first",
    description="Filters combine. " + NEXT_DOC,
)
def list_experiments(request: HttpRequest, response: HttpResponse, page: Query[ExperimentsQuery]):
    caller = require(request, Action.VIEW_DATASET)
    qs = selectors.experiments_of(caller.workspace)
    if page.dataset:
        qs = qs.filter(dataset__public_id=page.dataset)
    if page.status:
        qs = qs.filter(status=page.status)
    return {"experiments": [presenters.experiment_row(e) for e in newest(request, response, qs, page)]}


@experiments_router.get(
    "/{experiment_id}",
    response={200: ExperimentOut, **ERRORS},
    summary="An experiment: items, scores and summary",
)
def get_experiment(request: HttpRequest, experiment_id: str):
    caller = require(request, Action.VIEW_DATASET)
    experiment = selectors.get_experiment(caller.workspace, experiment_id)
    return presenters.experiment_json(experiment, selectors.experiment_items(experiment))


@experiments_router.post(
    "/{experiment_id}/rescore",
    response={200: ExperimentOut, **ERRORS},
    summary="Score the stored outputs again (no fork, no task model call)",
    openapi_extra=_request_body("RescoreIn"),
)
def rescore_experiment(request: HttpRequest, experiment_id: str):
    caller = require(request, Action.RUN_EXPERIMENT)
    experiment = selectors.get_experiment(caller.workspace, experiment_id)
    data = _body(request, frozenset({"evaluator"}))
    experiment = actions.do_rescore_experiment(
        experiment, evaluator=data.get("evaluator"), actor=caller.actor
    )
    return presenters.experiment_json(experiment, selectors.experiment_items(experiment))


@experiments_router.post(
    "/{experiment_id}/cancel",
    response={200: ExperimentOut, **ERRORS},
    summary="Cancel a pending or running experiment",
    description=(
        'The experiment ends `failed` at once (`error`: "CANCELLED: cancelled by <user>"), its pending '
        "items never run, and the forks of its running items are cancelled: no request reaches a "
        "provider after this answer (the call under way is shut). Items still running finish being "
        "recorded within a moment (poll `progress`). An experiment that already ended: `409 CONFLICT`."
    ),
)
def cancel_experiment(request: HttpRequest, experiment_id: str):
    caller = require(request, Action.RUN_EXPERIMENT)
    experiment = selectors.get_experiment(caller.workspace, experiment_id)
    experiment = actions.do_cancel_experiment(experiment, actor=caller.actor)
    return presenters.experiment_json(experiment, selectors.experiment_items(experiment))


def register(api: NinjaAPI) -> None:
    """Mount the routers on the one API (workbench.urls calls this before the API's URLs are built)."""
    api.add_router("/datasets", datasets_router)
    api.add_router("/experiments", experiments_router)

    @api.exception_handler(selectors.EvalNotFound)
    def _not_found(request, exc: selectors.EvalNotFound):
        return api.create_response(request, {"error": exc.what, "code": exc.code}, status=404)
