"""The response cache (seed 002's invocation log): recorded model answers by LLM cache key.

Filled by the one write path: whenever a ``model_io`` response is appended to a run, the
request it answers (the latest ``model_io`` request with the same correlation id, or the
event right before it when there is none) and the stream chunks between them are stored under
the request's cache keys (v2 and v1, :mod:`runs.protocol.cachekey`), in the run's workspace.
The same answer to the same request is kept once; different answers to one request are all
kept, and a lookup prefers the one recorded by a given run (the replay's source).

The small API for the provider layer and traced wrappers:

    keys = request_keys(provider, model, wire_body)      # {"v1": ..., "v2": ...} or None
    entry = lookup(workspace, keys["v2"], prefer_run=source_run)
    if entry is not None:
        record_hit(entry)
        entry.request_fields, entry.response_fields, entry.chunk_fields  # what to re-record

Nothing here crosses workspaces: every read and write takes the workspace first.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.db.models import Case, F, IntegerField, Value, When
from django.utils import timezone

from runs.models import CachedResponse, Event, Run, Workspace, dumps, loads
from runs.protocol.cachekey import llm_cache_key, request_from_wire
from runs.protocol.canonical import canonical_bytes
from runs.protocol.errors import ProtocolError

# model_io fields that make up a recorded call (ids, times, step and correlation are the caller's)
MODEL_IO_FIELDS = ("direction", "provider", "model", "usage", "cost", "durationMs", "summary", "payload")


def request_keys(provider: str | None, model: str | None, body: Any) -> dict[str, str] | None:
    """Both cache keys of a provider request body, or None when it cannot be keyed."""
    if not provider or not isinstance(body, dict):
        return None
    try:
        request = request_from_wire(provider, model, body)
        return {"v2": llm_cache_key(request, recipe="v2"), "v1": llm_cache_key(request, recipe="v1")}
    except ProtocolError:
        return None


def event_keys(event: dict) -> dict[str, str] | None:
    """Cache keys of a recorded ``model_io`` request event."""
    return request_keys(event.get("provider"), event.get("model"), event.get("payload"))


def model_io_fields(event: dict) -> dict[str, Any]:
    return {k: event[k] for k in MODEL_IO_FIELDS if k in event}


def _request_and_chunks(run: Run, seq: int, response: dict) -> tuple[tuple[int, dict] | None, list[dict]]:
    correlation = response.get("correlationId")
    if correlation:
        rows = list(
            Event.objects.filter(run=run, correlation_id=correlation, seq__lt=seq, type="model_io")
            .order_by("-seq")
            .values_list("seq", "body")[:5000]
        )
        chunks: list[dict] = []
        for row_seq, body in rows:
            event = loads(body)
            direction = event.get("direction")
            if direction == "request":
                return (row_seq, event), list(reversed(chunks))
            if direction == "response":
                return None, []
            chunks.append(event)
        return None, []
    row = Event.objects.filter(run=run, seq__lt=seq).order_by("-seq").values_list("seq", "body").first()
    if row is None:
        return None, []
    event = loads(row[1])
    if (
        event.get("type") == "model_io"
        and event.get("direction") == "request"
        and not event.get("correlationId")
    ):
        return (row[0], event), []
    return None, []


def fill_from_responses(run: Run, responses: list[tuple[int, dict]]) -> int:
    """Store the calls these appended responses complete (inside the appending transaction)."""
    rows = []
    for seq, response in responses:
        found, chunks = _request_and_chunks(run, seq, response)
        if found is None:
            continue
        request_seq, request = found
        keys = event_keys(request)
        if keys is None:
            continue
        stored = {
            "response": model_io_fields(response),
            "chunks": [model_io_fields(c) for c in chunks],
        }
        digest = hashlib.sha256(canonical_bytes(stored)).hexdigest()
        rows.append(
            CachedResponse(
                workspace_id=run.workspace_id,
                key=keys["v2"],
                key_v1=keys["v1"],
                provider=str(request.get("provider") or "")[:100],
                model=str(response.get("model") or request.get("model") or "")[:200],
                run=run,
                source_run_id=str(run.run_id),
                request_seq=request_seq,
                response_seq=seq,
                request=dumps(model_io_fields(request)),
                response=dumps(stored),
                response_digest=digest,
            )
        )
    if rows:
        CachedResponse.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def lookup(
    workspace: Workspace, key: str, *, recipe: str = "v2", prefer_run: Run | None = None
) -> CachedResponse | None:
    """The cached answer for ``key`` in this workspace (None on a miss).

    With ``prefer_run`` the answer recorded by that run wins (a replay gets its source's
    answer even when other runs got other answers to the same request); otherwise the newest.
    """
    field = "key" if recipe == "v2" else "key_v1"
    qs = CachedResponse.objects.filter(workspace=workspace, **{field: key})
    if prefer_run is not None:
        qs = qs.annotate(
            preferred=Case(When(run=prefer_run, then=Value(0)), default=Value(1), output_field=IntegerField())
        ).order_by("preferred", "-created_at", "-pk")
    else:
        qs = qs.order_by("-created_at", "-pk")
    return qs.first()


def record_hit(entry: CachedResponse) -> None:
    CachedResponse.objects.filter(pk=entry.pk).update(hits=F("hits") + 1, last_hit_at=timezone.now())


def request_fields(entry: CachedResponse) -> dict[str, Any]:
    return loads(entry.request)


def response_fields(entry: CachedResponse) -> dict[str, Any]:
    return loads(entry.response)["response"]


def chunk_fields(entry: CachedResponse) -> list[dict[str, Any]]:
    return loads(entry.response)["chunks"]


def as_json(entry: CachedResponse) -> dict[str, Any]:
    """What the cache lookup endpoint answers."""
    stored = loads(entry.response)
    return {
        "key": entry.key,
        "keyV1": entry.key_v1,
        "provider": entry.provider,
        "model": entry.model,
        "sourceRunId": entry.source_run_id,
        "request": loads(entry.request),
        "response": stored["response"],
        "chunks": stored["chunks"],
        "hits": entry.hits,
        "createdAt": entry.created_at.isoformat(),
    }
