"""View data of datasets and experiments (plain dicts for REST, MCP and pages; no queries here)."""

from __future__ import annotations

from typing import Any

from evals.actions.experiments import item_facts


def dataset_json(dataset: Any) -> dict[str, Any]:
    return {
        "id": dataset.public_id,
        "name": dataset.name,
        "description": dataset.description,
        "inputSchema": dataset.input_schema,
        "expectedSchema": dataset.expected_schema,
        "revision": dataset.revision,
        "createdBy": dataset.created_by,
        "createdAt": dataset.created_at.isoformat(),
    }


def experiment_row(experiment: Any) -> dict[str, Any]:
    summary = experiment.summary or {}
    mean = (summary.get("meanScore") or {}).get("mean")
    return {
        "id": experiment.public_id,
        "name": experiment.name,
        "datasetId": experiment.dataset.public_id,
        "status": experiment.status,
        "meanScore": mean,
        "createdAt": experiment.created_at.isoformat(),
    }


def item_json(row: Any) -> dict[str, Any]:
    return {"runId": row.run_id_text or None, **item_facts(row), "error": row.error}


def experiment_json(experiment: Any, items: list[Any]) -> dict[str, Any]:
    return {
        "id": experiment.public_id,
        "name": experiment.name,
        "datasetId": experiment.dataset.public_id,
        "asOf": experiment.as_of_revision,
        "status": experiment.status,
        "change": experiment.change or {},
        "fromStepId": experiment.from_step_id,
        "evaluator": experiment.evaluator or {},
        "baselineId": experiment.baseline.public_id if experiment.baseline_id else None,
        "summary": experiment.summary or {},
        "items": [item_json(row) for row in items],
        "rescored": experiment.rescored,
        "createdAt": experiment.created_at.isoformat(),
        "finishedAt": experiment.finished_at.isoformat() if experiment.finished_at else None,
    }
