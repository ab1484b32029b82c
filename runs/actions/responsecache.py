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

Retention (setting ``WORKBENCH_REPLAY_CACHE_DAYS``, 0 = keep forever): an answer expires that
many days after it was recorded or last used. Expired answers are no longer found (a replay
that needs one is refused) and :func:`prune` deletes them. Deleting a run deletes the answers it
recorded (:func:`forget_run`).
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Case, Count, F, IntegerField, Q, QuerySet, Value, When
from django.utils import timezone

from runs.models import CachedResponse, Event, Run, Workspace, sqlite_index_hint
from runs.protocol.cachekey import llm_cache_key, request_from_wire
from runs.protocol.canonical import canonical_bytes
from runs.protocol.errors import ProtocolError
from runs.protocol.values import dumps, loads

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


def _search_batch(
    recent: list[dict], recent_first: int, responses: list[tuple[int, dict]]
) -> tuple[dict[int, tuple[tuple[int, dict] | None, list[dict]]], dict[int, list[dict]], bool]:
    """The search among the events appended in this batch (seqs recent_first...), which need not
    be in the table yet, for every response at once (an index per correlation id, no rescans).

    Returns the decided responses {seq: (request, chunks)}, the undecided ones that have a
    correlation id {seq: chunks seen so far, newest first} (to go on before the batch), and
    whether a response without one sits first in the batch (its request would be the event
    right before the batch)."""
    by_correlation: dict[str, list[int]] = {}
    for index, event in enumerate(recent):
        correlation = event.get("correlationId")
        if correlation and event.get("type") == "model_io":
            by_correlation.setdefault(correlation, []).append(index)
    decided: dict[int, tuple[tuple[int, dict] | None, list[dict]]] = {}
    undecided: dict[int, list[dict]] = {}
    plain_first = False
    for seq, response in responses:
        position = seq - recent_first  # the response's index in `recent`
        correlation = response.get("correlationId")
        if not correlation:
            if position == 0:
                plain_first = True
                continue
            event = recent[position - 1]
            request = (
                event.get("type") == "model_io"
                and event.get("direction") == "request"
                and not event.get("correlationId")
            )
            decided[seq] = ((seq - 1, event), []) if request else (None, [])
            continue
        indexes = by_correlation.get(correlation, [])
        chunks: list[dict] = []
        outcome: tuple[tuple[int, dict] | None, list[dict]] | None = None
        for index in reversed(indexes[: bisect_left(indexes, position)]):
            event = recent[index]
            direction = event.get("direction")
            if direction == "request":
                outcome = ((recent_first + index, event), list(reversed(chunks)))
                break
            if direction == "response":
                outcome = (None, [])
                break
            chunks.append(event)
        if outcome is None:
            undecided[seq] = chunks
        else:
            decided[seq] = outcome
    return decided, undecided, plain_first


def _search_stored(
    run: Run, before: int, wanted: dict[int, tuple[str, list[dict]]]
) -> dict[int, tuple[tuple[int, dict] | None, list[dict]]]:
    """Go on before seq `before` in the table: one query for every correlation id still open."""
    correlations = {correlation[:200] for correlation, _ in wanted.values()}  # the column's width
    rows: dict[str, list[tuple[int, dict]]] = {}
    ordered = sorted(correlations)
    with connection.cursor() as cursor:
        for start in range(0, len(ordered), 900):
            chunk = ordered[start : start + 900]
            if connection.vendor == "postgresql":
                # One index probe per correlation id (event_run_corr). Given ``IN (...)``, the
                # planner chose event_run_type (run, type, seq) backward and filtered the ids
                # whenever it took the run for small (no statistics yet: a fresh database, or a
                # run created by this transaction, as an import's is): every batch of an import
                # then read all the run's model_io rows before it, quadratic in the trace (the
                # backend's CPU per event grew from ~120 us to ~400 us by 3.5M events). OFFSET 0
                # keeps the subquery a probe (pulled up, it became a hash join over that same scan).
                cursor.execute(
                    "SELECT e.seq, e.correlation_id, e.body FROM unnest(%s::text[]) AS c(id)"
                    " CROSS JOIN LATERAL (SELECT seq, correlation_id, body"
                    f" FROM {Event._meta.db_table} WHERE run_id = %s AND correlation_id = c.id"
                    " AND type = 'model_io' AND seq < %s ORDER BY seq DESC OFFSET 0) AS e"
                    " ORDER BY e.seq DESC",
                    [chunk, run.pk, before],
                )
            else:
                cursor.execute(
                    f"SELECT seq, correlation_id, body FROM {Event._meta.db_table}"
                    f"{sqlite_index_hint('event_run_corr')} WHERE run_id = %s"
                    f" AND correlation_id IN ({', '.join(['%s'] * len(chunk))})"
                    " AND type = 'model_io' AND seq < %s ORDER BY seq DESC",
                    [run.pk, *chunk, before],
                )
            for seq, correlation, body in cursor.fetchall():
                rows.setdefault(correlation, []).append((seq, loads(body)))
    out: dict[int, tuple[tuple[int, dict] | None, list[dict]]] = {}
    for seq, (correlation, chunks) in wanted.items():
        chunks = list(chunks)
        out[seq] = (None, [])
        for row_seq, event in rows.get(correlation[:200], []):
            direction = event.get("direction")
            if direction == "request":
                out[seq] = ((row_seq, event), list(reversed(chunks)))
                break
            if direction == "response":
                break
            chunks.append(event)
    return out


def _request_and_chunks(run: Run, seq: int, response: dict) -> tuple[tuple[int, dict] | None, list[dict]]:
    correlation = response.get("correlationId")
    chunks: list[dict] = []
    if correlation:
        rows = list(
            Event.objects.filter(run=run, correlation_id=correlation, seq__lt=seq, type="model_io")
            .order_by("-seq")
            .values_list("seq", "body")[:5000]
        )
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


def fill_from_responses(
    run: Run, responses: list[tuple[int, dict]], *, recent: list[dict] | None = None, recent_first: int = 0
) -> int:
    """Store the calls these appended responses complete (inside the appending transaction).

    `recent` are the events of the appending batch (seqs `recent_first`...), searched in memory
    first: a batch of recorded calls costs no query per response, and its rows may still be
    waiting to be written together with the run row."""
    if recent:
        decided, undecided, plain_first = _search_batch(recent, recent_first, responses)
        if undecided:
            # the undecided responses are those with a correlation id
            correlations = {
                seq: response["correlationId"] for seq, response in responses if response.get("correlationId")
            }
            wanted = {seq: (correlations[seq], chunks) for seq, chunks in undecided.items()}
            decided.update(_search_stored(run, recent_first, wanted))
        if plain_first:  # a response without correlation id first in the batch: the event before it
            first = dict(responses)[recent_first]
            decided[recent_first] = _request_and_chunks(run, recent_first, first)
    else:
        decided = {seq: _request_and_chunks(run, seq, response) for seq, response in responses}
    rows = []
    for seq, response in responses:
        found, chunks = decided[seq]
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
    if len(rows) > _COPY_MIN_ROWS and connection.vendor == "postgresql":
        _copy_rows(rows)
    elif rows:
        CachedResponse.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


# A larger batch (a bundle import) goes through COPY: the ORM's bulk_create spends ~0.2 ms of
# Python per row building its statement, more than the rest of an imported event costs.
_COPY_MIN_ROWS = 100
_COPY_FIELDS = (
    "workspace",
    "key",
    "key_v1",
    "provider",
    "model",
    "run",
    "source_run_id",
    "request_seq",
    "response_seq",
    "request",
    "response",
    "response_digest",
    "hits",
    "created_at",
)


def _copy_rows(rows: list[CachedResponse]) -> None:
    """``bulk_create(rows, ignore_conflicts=True)`` by COPY into a temporary table, then one
    ``INSERT ... ON CONFLICT DO NOTHING`` (COPY itself cannot skip a conflict). The values go
    through each field's own conversion (``get_db_prep_save``), as bulk_create's do."""
    fields = [f for f in CachedResponse._meta.concrete_fields if f.name in _COPY_FIELDS]
    now = timezone.now()
    qn = connection.ops.quote_name
    table = qn(CachedResponse._meta.db_table)
    columns = ", ".join(qn(f.column) for f in fields if f.column)  # concrete: each has a column
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TEMPORARY TABLE IF NOT EXISTS wb_cached_copy AS SELECT {columns} FROM {table}"
            " WITH NO DATA"
        )
        cursor.execute("TRUNCATE wb_cached_copy")
        with cursor.cursor.copy(f"COPY wb_cached_copy ({columns}) FROM STDIN") as copy:
            for row in rows:
                row.created_at = now
                copy.write_row([f.get_db_prep_save(getattr(row, f.attname), connection) for f in fields])
        cursor.execute(
            f"INSERT INTO {table} ({columns}) SELECT {columns} FROM wb_cached_copy ON CONFLICT DO NOTHING"
        )


def retention_boundary(now: datetime | None = None, *, days: int | None = None) -> datetime | None:
    """Answers recorded and last used before this moment have expired (None: nothing expires)."""
    days = settings.WORKBENCH_REPLAY_CACHE_DAYS if days is None else days
    if not days:
        return None
    return (now or timezone.now()) - timedelta(days=days)


def retained(qs: QuerySet, now: datetime | None = None) -> QuerySet:
    """The answers of ``qs`` that may still be served: not expired, and not recorded by a run that
    left their workspace (a run being purged is moved out of it at once, and its answers are then
    deleted in batches: ``runs.actions.retention``). An answer whose run is gone (no run) stays."""
    qs = qs.filter(Q(run__isnull=True) | Q(run__workspace_id=F("workspace_id")))
    boundary = retention_boundary(now)
    if boundary is None:
        return qs
    return qs.filter(Q(created_at__gte=boundary) | Q(last_hit_at__gte=boundary))


def prune(
    *, workspace: Workspace | None = None, now: datetime | None = None, days: int | None = None
) -> dict[str, int]:
    """Delete expired answers, one workspace at a time: {workspace slug: answers deleted}."""
    boundary = retention_boundary(now, days=days)
    if boundary is None:
        return {}
    deleted: dict[str, int] = {}
    for slug in expired_counts(boundary, workspace=workspace):
        count, _ = expired(boundary).filter(workspace__slug=slug).delete()
        if count:
            deleted[slug] = count
    return deleted


def expired(boundary: datetime) -> QuerySet:
    """Answers recorded and last used before ``boundary`` (every workspace: filter by one)."""
    return CachedResponse.objects.filter(created_at__lt=boundary).exclude(last_hit_at__gte=boundary)


def expired_counts(boundary: datetime, *, workspace: Workspace | None = None) -> dict[str, int]:
    """{workspace slug: expired answers}."""
    qs = expired(boundary)
    if workspace is not None:
        qs = qs.filter(workspace=workspace)
    rows = qs.values("workspace__slug").annotate(n=Count("pk")).order_by("workspace__slug")
    return {row["workspace__slug"]: row["n"] for row in rows}


def forget_run(run: Run) -> int:
    """Delete the answers ``run`` recorded (the run is being deleted: so is what it recorded)."""
    count, _ = CachedResponse.objects.filter(workspace_id=run.workspace_id, run=run).delete()
    return count


def lookup(
    workspace: Workspace, key: str, *, recipe: str = "v2", prefer_run: Run | None = None
) -> CachedResponse | None:
    """The cached answer for ``key`` in this workspace (None on a miss).

    With ``prefer_run`` the answer recorded by that run wins (a replay gets its source's
    answer even when other runs got other answers to the same request); otherwise the newest.
    """
    field = "key" if recipe == "v2" else "key_v1"
    qs = retained(CachedResponse.objects.filter(workspace=workspace, **{field: key}))
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
    if not isinstance(stored, dict):  # a row not written by record(): answered as it is, never a 500
        stored = {"response": stored}
    return {
        "key": entry.key,
        "keyV1": entry.key_v1,
        "provider": entry.provider,
        "model": entry.model,
        "sourceRunId": entry.source_run_id,
        "request": loads(entry.request),
        "response": stored.get("response"),
        "chunks": stored.get("chunks") or [],
        "hits": entry.hits,
        "createdAt": entry.created_at.isoformat(),
    }
