"""The storer of the scaled profile's OTLP buffer (``WORKBENCH_OTLP_BUFFER=redis``; see
runs/actions/otlp_streams.py): ``manage.py otlp_storer`` runs :func:`run`.

Each pass: first the entries other storers left pending past their lease (``XAUTOCLAIM``, at most
every :data:`CLAIM_EVERY` seconds), else new entries (``XREADGROUP``, waiting up to 1 s). The entries
are stored in batches of one workspace, header and actor up to ``batch_spans`` spans, through the
spool worker's path (:func:`runs.telemetry.otlp_worker.store`: the receiver's mapped spans,
``do_ingest_mapped``), and each batch is acknowledged (``XACK`` + ``XDEL``) only after its
transactions committed. A batch whose storing raised is left pending: it is claimed again after
the lease (by any storer, this one included) until its delivery count runs out.

Any number of storers, on any machines: each is a consumer of the group named by its host and pid
(``--consumer`` overrides it). The committed changes reach the live pages through the Redis
channel layer, as a web process's writes do.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from typing import IO

from django.conf import settings
from django.db import close_old_connections

from runs.actions.otlp_queue import Queued
from runs.actions.otlp_streams import StreamBuffer
from runs.telemetry.otlp_worker import store

log = logging.getLogger(__name__)
CLAIM_EVERY = 1.0  # seconds between looks for a dead storer's entries
ATTEMPTS = 3  # tries of a batch in a row before it is left to the lease
READ_COUNT = 4  # entries taken per read (two batches of 512-span bodies), so N storers share a burst


def consumer_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def batches(items: Sequence[Queued], max_spans: int) -> Iterator[list[Queued]]:
    """Consecutive entries of one workspace, header and actor, up to ``max_spans`` spans each
    (an entry larger than that is a batch of its own)."""
    batch: list[Queued] = []
    spans = 0
    for item in items:
        key = (item.workspace_id, item.header_run_id, item.actor)
        if batch and (
            (batch[0].workspace_id, batch[0].header_run_id, batch[0].actor) != key
            or spans + item.spans > max_spans
        ):
            yield batch
            batch, spans = [], 0
        batch.append(item)
        spans += item.spans
    if batch:
        yield batch


def run(
    *,
    buffer: StreamBuffer | None = None,
    consumer: str | None = None,
    stop: threading.Event | None = None,
    once: bool = False,
    batch_spans: int | None = None,
    lease: float | None = None,
    journal: IO[str] | None = None,
) -> int:
    """Store entries until ``stop`` is set or, with ``once``, nothing is left to read or claim.
    Returns how many entries were stored. ``journal``: a line per stored entry (its id, spans, the
    seconds its batch took, the wall-clock time it was acknowledged)."""
    buffer = buffer or StreamBuffer()
    consumer = consumer or consumer_name()
    batch_spans = settings.WORKBENCH_OTLP_WORKER_BATCH_SPANS if batch_spans is None else batch_spans
    idle_ms = int(1000 * (settings.WORKBENCH_OTLP_STREAM_LEASE_SECONDS if lease is None else lease))
    buffer.ensure_group()
    stored = 0
    claimed_at = 0.0
    while stop is None or not stop.is_set():
        items: list[Queued] = []
        now = time.monotonic()
        if once or now - claimed_at >= CLAIM_EVERY:
            claimed_at = now
            items = buffer.claim_stale(consumer, idle_ms)
        if not items:
            items = buffer.read(consumer, READ_COUNT, None if once else 1000)
        if not items:
            if once:
                break
            continue
        for batch in batches(items, batch_spans):
            stored += _store_batch(buffer, batch, journal)
    return stored


def _store_batch(buffer: StreamBuffer, batch: list[Queued], journal: IO[str] | None) -> int:
    """Store a batch and acknowledge it. A failure is tried again at once, up to :data:`ATTEMPTS`
    times (a database hiccup; a batch left to its lease would wait 30 s for that). Two storers of
    one workspace no longer deadlock on its rollup rows: they are written at the end of each
    transaction, in one order (runs.actions.rollups.deferred). After that it stays pending for
    the lease."""
    started = time.perf_counter()
    for attempt in range(1, ATTEMPTS + 1):
        try:
            store(batch)
            break
        except Exception:  # a deadlock, a database hiccup: nothing of the failed transaction stayed
            log.exception(
                "otlp stream: storing %s failed (attempt %d of %d)",
                ", ".join(item.path.name for item in batch),
                attempt,
                ATTEMPTS,
            )
            close_old_connections()
            if attempt == ATTEMPTS:
                return 0  # left pending: claimed again after the lease
            time.sleep(0.05 * attempt)
    buffer.done(batch)  # after the commits: a crash before this line stores the batch again, once
    if journal is not None:
        took = time.perf_counter() - started
        for item in batch:
            journal.write(f"{item.path.name} {item.spans} {took:.6f} {time.time():.6f}\n")
        journal.flush()
    return len(batch)
