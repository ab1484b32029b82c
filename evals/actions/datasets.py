"""The evals write path: datasets, their items, experiments. Every write of the app ends here.

Anything that touches runs (forks for experiments) goes through ``runs.actions``; this module
only writes the app's own rows. Items are appended as revisions (``put``/``delete`` of one key):
nothing is updated in place, so the items as of a revision never change.
"""

from __future__ import annotations

import csv
import hashlib
import io
from typing import Any

import jsonschema
from django.db import transaction
from django.utils import timezone

from evals import selectors
from evals.models import Dataset, DatasetItemRevision, ItemOp
from runs.actions import ActionError
from runs.models import Run, Workspace
from runs.protocol.canonical import canonical_str, parse_json
from runs.protocol.errors import ErrorCode
from runs.protocol.values import new_id

MAX_ITEMS_PER_REQUEST = 1000
MAX_TEXT = 200
ITEM_FIELDS = frozenset({"id", "input", "expected", "label", "note", "metadata", "source"})
CONFLICT = "CONFLICT"


def invalid(message: str, path: str = "") -> ActionError:
    return ActionError(ErrorCode.INVALID_INPUT, message, path)


def text_field(value: Any, field: str, *, required: bool = False, limit: int = MAX_TEXT) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise invalid(
            f"{field} must be a non-empty string" if required else f"{field} must be a string", field
        )
    if len(value) > limit:
        raise invalid(f"{field} has at most {limit} characters", field)
    if "\x00" in value:
        raise invalid(f"{field} cannot contain NUL", field)
    return value


def _schema(value: Any, field: str) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise invalid(f"{field} must be a JSON Schema object", field)
    try:
        jsonschema.validators.validator_for(value).check_schema(value)
    except jsonschema.SchemaError as exc:
        raise invalid(f"{field} is not a valid JSON Schema: {exc.message}", field) from None
    return value


def do_create_dataset(
    *,
    workspace: Workspace,
    name: Any,
    description: Any = None,
    input_schema: Any = None,
    expected_schema: Any = None,
    actor: str = "",
) -> Dataset:
    name = text_field(name, "name", required=True).strip()
    description = text_field(description, "description", limit=5000)
    schemas = _schema(input_schema, "inputSchema"), _schema(expected_schema, "expectedSchema")
    with transaction.atomic():
        if Dataset.objects.filter(workspace=workspace, name=name).exists():
            raise ActionError(CONFLICT, f"a dataset named {name!r} already exists in this workspace", "name")
        return Dataset.objects.create(
            public_id=new_id("ds"),
            workspace=workspace,
            name=name,
            description=description,
            input_schema=schemas[0],
            expected_schema=schemas[1],
            created_by=actor,
            created_at=timezone.now(),
        )


# items --------------------------------------------------------------------------------------------


def _item_key(item: dict, source_key: str) -> str:
    if item.get("id") is not None:
        return text_field(item["id"], "items[].id", required=True)
    if source_key:
        return "item_" + hashlib.sha256(source_key.encode()).hexdigest()[:24]
    return new_id("item")


def _source(item: dict, index: int) -> tuple[str, str, int | None, str]:
    source = item.get("source")
    if source is None:
        return "", "", None, ""
    if not isinstance(source, dict):
        raise invalid("source must be an object {runId, eventId?, seq?}", f"items[{index}].source")
    run_id = text_field(source.get("runId"), f"items[{index}].source.runId")
    event_id = text_field(source.get("eventId"), f"items[{index}].source.eventId")
    seq = source.get("seq")
    if seq is not None and (type(seq) is not int or seq < 1):
        raise invalid("source.seq must be an integer >= 1", f"items[{index}].source.seq")
    key = source.get("key") or (f"{run_id}#{event_id or seq or ''}" if run_id else "")
    return run_id, event_id, seq, key


def check_item(dataset: Dataset, item: Any, index: int) -> dict[str, Any]:
    """One item of a request, checked (fields, schemas), with its key and source."""
    path = f"items[{index}]"
    if not isinstance(item, dict):
        raise invalid("each item must be an object {input, expected?, label?, note?, id?}", path)
    unknown = set(item) - ITEM_FIELDS - {"sourceKey"}
    if unknown:
        raise invalid(f"unknown item field(s): {', '.join(sorted(unknown))}", path)
    if "input" not in item:
        raise invalid("an item needs an input", f"{path}.input")
    for field, schema in (("input", dataset.input_schema), ("expected", dataset.expected_schema)):
        if schema is not None and (field == "input" or item.get(field) is not None):
            error = jsonschema.exceptions.best_match(
                jsonschema.validators.validator_for(schema)(schema).iter_errors(item.get(field))
            )
            if error is not None:
                raise invalid(
                    f"{field} does not match the dataset's schema: {error.message}", f"{path}.{field}"
                )
    label = text_field(item.get("label"), f"{path}.label")
    note = text_field(item.get("note"), f"{path}.note", limit=5000)
    metadata = item.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise invalid("metadata must be an object", f"{path}.metadata")
    run_id, event_id, seq, source_key = _source(item, index)
    body: dict[str, Any] = {"input": item.get("input"), "expected": item.get("expected")}
    if label:
        body["label"] = label
    if note:
        body["note"] = note
    if metadata:
        body["metadata"] = metadata
    try:
        text = canonical_str(body)
    except Exception as exc:  # numbers JSON cannot hold, lone surrogates ...
        raise invalid(f"the item is not representable as JSON: {exc}", path) from None
    return {
        "key": _item_key(item, source_key),
        "body": text,
        "source_run_id": run_id,
        "source_event_id": event_id,
        "source_seq": seq,
        "source_key": source_key,
    }


def do_add_items(*, dataset: Dataset, items: list[Any], actor: str = "") -> tuple[int, int]:
    """Append items (a ``put`` each) as one new revision; items whose source the dataset already
    holds are left out. Returns (added, revision): revision is unchanged when nothing was added."""
    if not isinstance(items, list):
        raise invalid("items must be a list", "items")
    if len(items) > MAX_ITEMS_PER_REQUEST:
        raise invalid(f"at most {MAX_ITEMS_PER_REQUEST} items per request", "items")
    checked = [check_item(dataset, item, i) for i, item in enumerate(items)]
    with transaction.atomic():
        locked = Dataset.objects.select_for_update().get(pk=dataset.pk)
        held = selectors.known_sources(locked, {c["source_key"] for c in checked if c["source_key"]})
        fresh, seen = [], set()
        for c in checked:
            marker = c["source_key"] or c["key"]
            if (c["source_key"] and c["source_key"] in held) or marker in seen:
                continue
            seen.add(marker)
            fresh.append(c)
        if not fresh:
            return 0, locked.revision
        revision = locked.revision + 1
        now = timezone.now()
        DatasetItemRevision.objects.bulk_create(
            [
                DatasetItemRevision(
                    dataset=locked,
                    revision=revision,
                    item_key=c["key"],
                    op=ItemOp.PUT,
                    body=c["body"],
                    source_run_id=c["source_run_id"],
                    source_event_id=c["source_event_id"],
                    source_seq=c["source_seq"],
                    source_key=c["source_key"],
                    actor=actor,
                    created_at=now,
                )
                for c in fresh
            ]
        )
        Dataset.objects.filter(pk=locked.pk).update(revision=revision)
        dataset.revision = revision
        return len(fresh), revision


def do_delete_items(*, dataset: Dataset, item_ids: object, actor: str = "") -> tuple[int, int]:
    """Append a ``delete`` for each item that exists; the items stay readable at older revisions."""
    if not isinstance(item_ids, list) or not all(isinstance(i, str) for i in item_ids):
        raise invalid("itemIds must be a list of item ids", "itemIds")
    with transaction.atomic():
        locked = Dataset.objects.select_for_update().get(pk=dataset.pk)
        present = {item["id"] for item in selectors.items_at(locked, locked.revision)}
        gone = sorted(set(item_ids) & present)
        if not gone:
            return 0, locked.revision
        revision = locked.revision + 1
        now = timezone.now()
        DatasetItemRevision.objects.bulk_create(
            [
                DatasetItemRevision(
                    dataset=locked,
                    revision=revision,
                    item_key=key,
                    op=ItemOp.DELETE,
                    actor=actor,
                    created_at=now,
                )
                for key in gone
            ]
        )
        Dataset.objects.filter(pk=locked.pk).update(revision=revision)
        dataset.revision = revision
        return len(gone), revision


# sources ------------------------------------------------------------------------------------------


def _step_keys(run: Run, step_id: str) -> tuple[list[str], list[str]]:
    step = selectors.step_of(run, step_id) or {}
    return list(step.get("inputs") or []), list(step.get("outputs") or [])


def items_from_gates(
    workspace: Workspace, step_id: Any, *, workflow_id: Any = None, limit: Any = None
) -> list[dict[str, Any]]:
    """One item per decided gate of ``step_id``: input = the step's input artifacts at the
    decision, expected = its output artifacts then (an "Approve with edits" edit included: it is
    written just before the decision), label = the decision, note = the reviewer's note."""
    step_id = text_field(step_id, "fromGates.stepId", required=True)
    workflow_id = text_field(workflow_id, "fromGates.workflowId") or None
    if limit is None:
        limit = MAX_ITEMS_PER_REQUEST
    if type(limit) is not int or not 1 <= limit <= MAX_ITEMS_PER_REQUEST:
        raise invalid(f"limit must be an integer from 1 to {MAX_ITEMS_PER_REQUEST}", "fromGates.limit")
    items = []
    for run, event, seq, actor in selectors.gate_resolutions(
        workspace, step_id, workflow_id=workflow_id, limit=limit
    ):
        inputs, outputs = _step_keys(run, step_id)
        values = selectors.artifacts_at(run, seq, inputs + outputs)
        item: dict[str, Any] = {
            "input": {k: values[k] for k in inputs if k in values},
            "expected": selectors.output_value({k: values[k] for k in outputs if k in values}, outputs),
            "label": event.get("decision"),
            "metadata": {
                "stepId": step_id,
                "gate": event.get("gate"),
                "outputKeys": outputs,
                "decidedBy": actor,
                "workflowId": run.workflow_id,
            },
            "source": {"runId": run.run_id, "eventId": event.get("id"), "seq": seq},
        }
        if event.get("note") and not (event.get("correlationId") or "").endswith(event["note"]):
            item["note"] = event["note"]
        items.append(item)
    return items


def _run_item(run: Run, step_id: str | None) -> dict[str, Any]:
    if step_id:
        if selectors.step_of(run, step_id) is None:
            raise invalid(f"run {run.run_id!r} has no step {step_id!r}", "fromRuns.stepId")
        inputs, outputs = _step_keys(run, step_id)
    else:
        steps = (selectors.start_doc(run).get("workflowSnapshot") or {}).get("steps") or []
        inputs = list((steps[0].get("inputs") or []) if steps else [])
        outputs = list((steps[-1].get("outputs") or []) if steps else [])
    values = selectors.artifacts_at(run, run.last_seq, inputs + outputs)
    return {
        "input": {k: values[k] for k in inputs if k in values} or {"subject": run.subject},
        "expected": selectors.output_value({k: values[k] for k in outputs if k in values}, outputs),
        "metadata": {
            "stepId": step_id,
            "outputKeys": outputs,
            "workflowId": run.workflow_id,
            "status": run.status,
        },
        "source": {"runId": run.run_id, "seq": run.last_seq, "key": f"run:{run.run_id}:{step_id or ''}"},
    }


def items_from_runs(workspace: Workspace, run_ids: Any, step_id: Any = None) -> list[dict[str, Any]]:
    """One item per run (exactly these runs: a missing one is an error, not skipped)."""
    if not isinstance(run_ids, list) or not run_ids or not all(isinstance(r, str) for r in run_ids):
        raise invalid("fromRuns.runIds must be a non-empty list of run ids", "fromRuns.runIds")
    if len(run_ids) > MAX_ITEMS_PER_REQUEST:
        raise invalid(f"at most {MAX_ITEMS_PER_REQUEST} runs per request", "fromRuns.runIds")
    step = text_field(step_id, "fromRuns.stepId") or None
    items = []
    for run_id in dict.fromkeys(run_ids):
        run = selectors.find_source_run(workspace, run_id)
        if run is None:
            raise ActionError(
                ErrorCode.UNKNOWN_RUN, f"no run {run_id!r} in this workspace", "fromRuns.runIds"
            )
        items.append(_run_item(run, step))
    return items


def item_from_event(workspace: Workspace, run_id: Any, seq: Any) -> dict[str, Any]:
    """ "Add to dataset" on the timeline: input = the state's artifacts the event's step reads,
    expected = what the event wrote (an artifact) or the event itself."""
    run = selectors.find_source_run(workspace, text_field(run_id, "fromEvent.runId", required=True))
    if run is None:
        raise ActionError(ErrorCode.UNKNOWN_RUN, f"no run {run_id!r} in this workspace", "fromEvent.runId")
    if type(seq) is not int or seq < 1:
        raise invalid("fromEvent.seq must be an integer >= 1", "fromEvent.seq")
    found = selectors.event_of(run, seq=seq)
    if found is None:
        raise invalid(f"run {run.run_id!r} has no event {seq}", "fromEvent.seq")
    _, event = found
    step_id = event.get("stepId")
    inputs = _step_keys(run, step_id)[0] if step_id else []
    values = selectors.artifacts_at(run, max(seq - 1, 0), inputs) if inputs else {}
    expected = event.get("data") if event.get("type") == "artifact_written" else event
    return {
        "input": values,
        "expected": expected,
        "metadata": {"stepId": step_id, "eventType": event.get("type")},
        "source": {"runId": run.run_id, "eventId": event.get("id"), "seq": seq},
    }


def items_from_upload(data: bytes, content_type: str) -> list[Any]:
    """A JSON list (or {"items": [...]}) or CSV with columns input, expected, label, note (cells
    holding JSON are parsed, others kept as text)."""
    if "csv" in content_type:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise invalid("a CSV upload must be UTF-8", "file") from None
        reader = csv.DictReader(io.StringIO(text))
        if not reader.fieldnames or "input" not in reader.fieldnames:
            raise invalid("a CSV upload needs an input column", "file")
        rows = []
        for row in reader:
            item: dict[str, Any] = {}
            for field in ("id", "input", "expected", "label", "note"):
                cell = row.get(field)
                if cell is None or cell == "":
                    continue
                if field in ("input", "expected"):
                    try:
                        item[field] = parse_json(cell)
                    except Exception:
                        item[field] = cell
                else:
                    item[field] = cell
            rows.append(item)
        return rows
    try:
        parsed = parse_json(data)
    except Exception:
        raise invalid("the upload is not JSON (or CSV with a text/csv type)", "file") from None
    if isinstance(parsed, dict) and isinstance(parsed.get("items"), list):
        parsed = parsed["items"]
    if not isinstance(parsed, list):
        raise invalid('a JSON upload is a list of items or {"items": [...]}', "file")
    return parsed
