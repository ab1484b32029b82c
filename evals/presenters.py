"""View data of datasets and experiments (plain dicts for REST, MCP and pages; no queries here)."""

from __future__ import annotations

import json
from typing import Any

from evals import scoring
from evals.actions.experiments import item_facts
from runs.protocol.values import loads


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


def progress(items: list[Any]) -> dict[str, int]:
    """How far the items are: total, finished (completed, waiting or failed), running, pending."""
    counts = {"pending": 0, "running": 0}
    for row in items:
        if row.status in counts:
            counts[row.status] += 1
    return {"total": len(items), "done": len(items) - counts["pending"] - counts["running"], **counts}


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
        "error": experiment.error,
        "progress": progress(items),
        "items": [item_json(row) for row in items],
        "rescored": experiment.rescored,
        "createdAt": experiment.created_at.isoformat(),
        "finishedAt": experiment.finished_at.isoformat() if experiment.finished_at else None,
    }


def _pretty(text: str) -> str:
    if not text:
        return ""
    return json.dumps(loads(text), indent=2, ensure_ascii=False, sort_keys=True)


def compare_rows(
    candidate: Any,
    baseline: Any,
    columns: list[Any],
    items: dict[int, dict[str, Any]],
    expected: dict[str, Any],
) -> list[dict[str, Any]]:
    """One row per item of the candidate: each experiment's cell (score, status, cost delta,
    latency, first divergence), the delta to the baseline, worst regressions first."""
    rows = []
    for key, row in items[candidate.pk].items():
        base = items[baseline.pk].get(key) if baseline is not None else None
        delta = None
        if base is not None and base.score is not None and row.score is not None:
            delta = row.score - base.score
        regressed = (
            base is not None
            and base.score is not None
            and (row.score is None or row.score < base.score - 1e-9)
        )
        cells = []
        for experiment in columns:
            found = items[experiment.pk].get(key)
            cells.append(None if found is None else {**item_json(found), "runId": found.run_id_text})
        output, base_output = _pretty(row.output), _pretty(base.output) if base is not None else ""
        rows.append(
            {
                "itemId": key,
                "cells": cells,
                "delta": delta,
                "regressed": regressed,
                "output": output,
                "baselineOutput": base_output,
                "outputChanged": base is not None and output != base_output,
                "expected": json.dumps(expected.get(key, {}).get("expected"), indent=2, sort_keys=True),
                "label": expected.get(key, {}).get("label"),
            }
        )
    rows.sort(key=lambda r: (not r["regressed"], r["delta"] if r["delta"] is not None else 0.0, r["itemId"]))
    return rows


PASS_LABELS = frozenset({"approved"})
LABELS = frozenset({"approved", "rejected", "edited"})


def calibration(items: list[Any], expected: dict[str, Any]) -> list[dict[str, Any]]:
    """Agreement of each evaluator version that scored these items (a score >= 0.5 is a pass) with
    the people's gate decisions on the same items (approved = pass; rejected or edited = fail):
    Cohen's kappa, true-positive and true-negative rates, the confusion table. Meaningful for a
    replay (empty change): the outputs scored are the ones the reviewers decided on."""
    pairs: dict[str, list[tuple[bool, bool]]] = {}
    for row in items:
        label = (expected.get(row.item_key) or {}).get("label")
        if label not in LABELS:
            continue
        history = (row.score_detail or {}).get("history") or {}
        for evaluator, score in history.items():
            if score is not None:
                pairs.setdefault(evaluator, []).append((score >= 0.5, label in PASS_LABELS))
    return [{"evaluator": name, **scoring.cohen_kappa(found)} for name, found in sorted(pairs.items())]


def prompt_match(change: dict[str, Any], asked: str) -> dict[str, Any]:
    """What an experiment's change says of a prompt version ``asked`` (``name@N``, may be empty):
    ``tested_prompt`` ("name version N" or ""), and ``prompt_mismatch`` when a version was asked
    for and the experiment tested another prompt version or no prompt at all."""
    ref = change.get("prompt") if isinstance(change.get("prompt"), dict) else None
    tested = f"{ref['name']}@{ref['version']}" if ref else ""
    return {
        "tested_prompt": f"{ref['name']} version {ref['version']}" if ref else "",
        "prompt_mismatch": bool(asked) and tested != asked,
    }


def change_rows(change: Any) -> list[dict[str, str]]:
    """An experiment's change as rows a page shows (never a Python dict): the prompt version it
    tests, then each configurable key with its value as compact JSON. ``[]``: a replay."""
    if not isinstance(change, dict) or not change:
        return []
    rows = []
    ref = change.get("prompt") if isinstance(change.get("prompt"), dict) else None
    if ref:
        rows.append({"key": "prompt", "value": f"{ref.get('name', '?')} version {ref.get('version', '?')}"})
    configurable = change.get("configurable")
    if isinstance(configurable, dict):
        for key in sorted(configurable):
            rows.append({"key": str(key), "value": _compact(configurable[key])})
    for key in sorted(k for k in change if k not in ("prompt", "configurable")):
        rows.append({"key": str(key), "value": _compact(change[key])})
    return rows


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(", ", ": "))
