"""The OTLP buffer of the scaled profile (``WORKBENCH_OTLP_BUFFER=redis``): a Redis Stream between
any number of receivers (the web processes answering ``POST /v1/traces``) and any number of storers
(``manage.py otlp_storer``, runs/telemetry/otlp_storer.py), on any number of machines.

The receiver does as the spool's receiver does: a protobuf body that passes the cheap check
(:func:`runs.telemetry.otlp_ingest.spoolable_protobuf_spans`: it parses, its ids and times are
well formed, it names no run) is added as it came (:func:`do_stream_body`) and a storer decodes and
maps it; any other body is checked and mapped first (:func:`do_stream_spans`, with
:func:`runs.actions.otlp_queue.check_and_map`: refusals are answered at once, in
``partial_success``). Either way the receiver adds ONE entry to the stream (``XADD``) and answers
2xx only after Redis returned the entry's id: a 2xx means the batch is in Redis (how durable that
is depends on Redis's persistence settings: docs/deployment.md, "OTLP ingest with Redis Streams").

Storers read with the consumer group :data:`GROUP` (``XREADGROUP``): each entry is delivered to one
storer and stays in the group's pending list until that storer acknowledges it, which it does only
after the database committed the batch (``XACK`` and ``XDEL`` in one ``MULTI``). A storer that dies
(``kill -9``, a machine gone) leaves its entries pending; any storer takes over the entries idle
longer than ``WORKBENCH_OTLP_STREAM_LEASE_SECONDS`` (``XAUTOCLAIM``) and stores them again. Storing
twice stores once: a span's event ids come from its trace and span ids, a run skips the events it
already holds (under the run's row lock), and a trace's run is unique per workspace
(``OtelTrace``), so an entry committed but not acknowledged when its storer died adds nothing the
second time. An entry delivered :data:`MAX_DELIVERIES` times without being stored (a bug, a batch
the database refuses) is moved to ``<stream>:failed`` for the operator, never retried on its own.

Bounded: an entry is deleted once stored, so the stream's length is the backlog. A receiver adds an
entry only while the backlog is under ``WORKBENCH_OTLP_STREAM_MAX_BATCHES`` (checked and added in
one Lua script, atomic in Redis) and otherwise answers 503 with ``Retry-After`` (OTLP exporters
retry), having added nothing. ``XADD`` carries ``MAXLEN ~`` twice that bound, a cap on Redis's memory
that the backlog check keeps from ever trimming an entry not yet stored.

Each entry: ``head`` (JSON: workspace, ``X-Workbench-Run`` header, actor, content type, spans),
``mapped`` (the check's mapped spans, :func:`runs.actions.otlp_queue.mapped_section`; empty for a
body added as it came, or when they could not be serialised) and ``body`` (the request's body,
decompressed; decoded by the storer when ``mapped`` is empty or content logs wait for these
traces; a span only the mapping refuses is then logged by the storer, as OTLP allows after a 2xx).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis
from django.conf import settings

from runs.actions.otlp import IngestReport
from runs.actions.otlp_queue import Queued, QueueFull, check_and_map, dump_section
from runs.models import Workspace

log = logging.getLogger(__name__)

GROUP = "storers"
MAX_DELIVERIES = 5
_ADD = """
if redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[1]) then return false end
return redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*',
                  'head', ARGV[3], 'mapped', ARGV[4], 'body', ARGV[5])
"""
_clients: dict[str, redis.Redis] = {}
_clients_lock = threading.Lock()


def client_for(url: str) -> redis.Redis:
    """One client (one connection pool) per Redis URL and process. Reads time out after 10 s: a
    storer's blocking read waits 1 s at most."""
    with _clients_lock:
        found = _clients.get(url)
        if found is None:
            found = _clients[url] = redis.Redis.from_url(
                url, socket_connect_timeout=2, socket_timeout=10, health_check_interval=30
            )
        return found


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class StreamBuffer:
    """The stream ``key`` (``WORKBENCH_OTLP_STREAM``) on ``url`` (``REDIS_URL``) and its group."""

    def __init__(self, *, url: str | None = None, key: str | None = None, max_batches: int | None = None):
        url = url or settings.REDIS_URL
        if not url:
            raise ValueError("WORKBENCH_OTLP_BUFFER=redis needs REDIS_URL")
        self.client = client_for(url)
        self.key = key or settings.WORKBENCH_OTLP_STREAM
        self.failed_key = f"{self.key}:failed"
        self.max_batches = max_batches or settings.WORKBENCH_OTLP_STREAM_MAX_BATCHES
        self._add = self.client.register_script(_ADD)

    # -- the receiver's side

    def put(
        self,
        *,
        workspace_id: int,
        body: bytes,
        content_type: str,
        spans: int,
        header_run_id: str | None,
        actor: str,
        mapped: bytes | None,
    ) -> str:
        """Add one entry; its id once Redis has it. Raises :class:`QueueFull` (nothing added) when
        the backlog is at its bound or Redis does not answer."""
        head = {
            "workspace": workspace_id,
            "run": header_run_id,
            "actor": actor,
            "contentType": content_type,
            "spans": spans,
        }
        args: list[bytes | str | int] = [
            self.max_batches,
            2 * self.max_batches,
            json.dumps(head),
            mapped or b"",
            body,
        ]
        try:
            entry = self._add(keys=[self.key], args=args)
        except redis.RedisError as exc:
            raise QueueFull(f"Redis did not take the batch: {exc}") from None
        if entry is None:
            raise QueueFull(f"{self.max_batches} batches are waiting to be stored")
        return _text(entry)

    # -- the storer's side

    def ensure_group(self) -> None:
        """The consumer group (and the stream), created when missing; idempotent."""
        try:
            self.client.xgroup_create(self.key, GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def read(self, consumer: str, count: int, block_ms: int | None) -> list[Queued]:
        """Up to ``count`` entries never delivered before, now pending for ``consumer``; waits
        ``block_ms`` for one when none is there (None: does not wait)."""
        answer: Any = self.client.xreadgroup(GROUP, consumer, {self.key: ">"}, count=count, block=block_ms)
        entries: list = []
        for _stream, items in answer or ():
            entries += items
        return self._decode(entries)

    def claim_stale(self, consumer: str, idle_ms: int, count: int = 16) -> list[Queued]:
        """Entries pending longer than ``idle_ms`` for any consumer (one that died), now pending for
        ``consumer`` (``XAUTOCLAIM``, the whole pending list in pages of ``count``). An entry
        delivered :data:`MAX_DELIVERIES` times is moved to the failed stream instead."""
        start = "0-0"
        claimed: list = []
        while True:
            answer = self.client.xautoclaim(
                self.key, GROUP, consumer, min_idle_time=idle_ms, start_id=start, count=count
            )
            start, entries = _text(answer[0]), answer[1]
            gone = [_text(e) for e in (answer[2] if len(answer) > 2 else ())]
            if gone:  # deleted from the stream while pending (trimmed by hand): nothing to store
                self.client.xack(self.key, GROUP, *gone)
            claimed += [e for e in entries if e is not None and e[1] is not None]
            if start == "0-0" or len(claimed) >= count:
                break
        if not claimed:
            return []
        items = self._decode(claimed)
        return self._set_aside_exhausted(items)

    def done(self, items: Sequence[Queued]) -> None:
        """Stored and committed: acknowledged and deleted (one ``MULTI``)."""
        ids = [item.path.name for item in items]
        if not ids:
            return
        pipe = self.client.pipeline(transaction=True)
        pipe.xack(self.key, GROUP, *ids)
        pipe.xdel(self.key, *ids)
        pipe.execute()

    def deliveries(self, entry_id: str) -> int:
        """How many times the group delivered this entry (0 when it is not pending)."""
        rows = self.client.xpending_range(self.key, GROUP, min=entry_id, max=entry_id, count=1)
        return int(rows[0]["times_delivered"]) if rows else 0

    def _set_aside_exhausted(self, items: list[Queued]) -> list[Queued]:
        keep = []
        for item in items:
            if self.deliveries(item.path.name) < MAX_DELIVERIES:
                keep.append(item)
                continue
            fields: Any = self.client.xrange(self.key, item.path.name, item.path.name)
            pipe = self.client.pipeline(transaction=True)
            if fields:
                pipe.xadd(self.failed_key, {**fields[0][1], b"id": item.path.name.encode()})
            pipe.xack(self.key, GROUP, item.path.name)
            pipe.xdel(self.key, item.path.name)
            pipe.execute()
            log.error(
                "otlp stream: entry %s was delivered %d times without being stored; kept in %s",
                item.path.name,
                MAX_DELIVERIES,
                self.failed_key,
            )
        return keep

    def status(self) -> dict[str, Any]:
        """The backlog, what is pending per storer, and the failed entries."""
        self.ensure_group()
        pending = self.client.xpending(self.key, GROUP)
        return {
            "stream": self.key,
            "backlog": int(self.client.xlen(self.key)),
            "maxBatches": self.max_batches,
            "pending": int(pending["pending"]),
            "consumers": {_text(c["name"]): int(c["pending"]) for c in pending.get("consumers") or ()},
            "failed": int(self.client.xlen(self.failed_key)),
        }

    @staticmethod
    def _decode(entries: Sequence) -> list[Queued]:
        out = []
        for entry_id, fields in entries:
            head = json.loads(fields[b"head"])
            out.append(
                Queued(
                    path=Path(_text(entry_id)),  # the entry's id stands where the spool has a file name
                    workspace_id=int(head["workspace"]),
                    header_run_id=head.get("run"),
                    actor=str(head.get("actor") or "otlp"),
                    content_type=str(head["contentType"]),
                    spans=int(head["spans"]),
                    body=fields.get(b"body") or b"",
                    mapped=fields.get(b"mapped") or None,
                )
            )
        return out


def do_stream_spans(
    *,
    workspace: Workspace,
    spans: Sequence[dict],
    body: bytes,
    content_type: str,
    header_run_id: str | None = None,
    actor: str = "otlp",
    buffer: StreamBuffer | None = None,
) -> IngestReport:
    """Check the spans and add the batch to the stream (see the module's docstring). Raises
    :class:`QueueFull` (nothing added) when the backlog is at its bound or Redis is unreachable."""
    report, section = check_and_map(workspace, spans, header_run_id)
    if report.accepted <= 0:
        return report
    (buffer or StreamBuffer()).put(
        workspace_id=workspace.pk,
        body=body,
        content_type=content_type,
        spans=report.accepted,
        header_run_id=header_run_id,
        actor=actor,
        mapped=dump_section(section),
    )
    return report


def do_stream_body(
    *,
    workspace: Workspace,
    body: bytes,
    content_type: str,
    spans: int,
    actor: str = "otlp",
    buffer: StreamBuffer | None = None,
) -> IngestReport:
    """Add a body as it came, with no mapped part (a storer decodes, routes and maps it): the
    receiver's least work for a body :func:`runs.telemetry.otlp_ingest.spoolable_protobuf_spans`
    passed. Raises :class:`QueueFull` (nothing added) when the backlog is at its bound or Redis is
    unreachable."""
    report = IngestReport(accepted=spans)
    if spans <= 0:
        return report
    (buffer or StreamBuffer()).put(
        workspace_id=workspace.pk,
        body=body,
        content_type=content_type,
        spans=spans,
        header_run_id=None,
        actor=actor,
        mapped=None,
    )
    return report
