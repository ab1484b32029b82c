"""The OTLP queue's worker (see ``runs.actions.otlp_queue``): takes the oldest queued body, decodes
it and stores its spans through ``runs.actions.otlp.do_ingest_spans``, deletes it once stored, and
keeps its recent rate in the spool for the receivers' window.

``manage.py otlp_worker`` runs one (any number may share a spool). In the embedded profile the
server process starts its own on its first OTLP request (:func:`ensure_worker`,
``WORKBENCH_OTLP_WORKER_INPROCESS``): a child process, so storing runs on another core than
receiving. The child ends when its server does. Its committed changes go to the server over the
child's standard output (one JSON line each) and the server hands them to its listeners (the
live pages), since the embedded profile's channel layer lives in the server's memory.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import IO

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.backends.signals import connection_created

from runs.actions.notify import RunChange, dispatch_listeners
from runs.actions.otlp import IngestReport, do_ingest_mapped, do_ingest_spans, pending_logs_for
from runs.actions.otlp_queue import Queued, Spool, mapped_section, warm_worker
from runs.models import Workspace
from runs.protocol.errors import ProtocolError
from runs.telemetry import transcript_log
from runs.telemetry.gc_tuning import settle_heap
from runs.telemetry.otlp_ingest import spans_from_json, spans_from_protobuf

log = logging.getLogger(__name__)
PROTOBUF = "application/x-protobuf"
RECOVER_EVERY = 5.0  # seconds between looks for the claims of dead workers
READY_FILES = 2048  # transcript files made ahead while idle (a run per trace: see transcript_log)


class RateMeter:
    """The worker's drain rate for the receivers' window: the slowest of the last three batches
    (spans over seconds of storing, the claim included), written to the spool after each batch.
    The slowest, not the mean: when storing slows down (a busy disk, a neighbour on the core), the
    window must not promise what the recent fast batches did (the latest batch is always among
    them, so a slowdown counts at once). Three, not more: a slow batch of another kind (new runs
    for 1,000 small traces is 30-40% slower per span than appends to one run) held the window of
    the next eight batches down to its rate (measured with 8: a 10,000-span trace after small
    ones answered at 17,000-18,000 spans/s, with 3 at 28,000-31,000, its largest lag 0.68 s)."""

    def __init__(self, spool: Spool, keep: int = 3) -> None:
        self.spool = spool
        self.recent: deque[float] = deque(maxlen=keep)

    @property
    def rate(self) -> float | None:
        return min(self.recent) if self.recent else None

    def add(self, spans: int, seconds: float) -> None:
        if spans <= 0 or seconds <= 0:
            return
        self.recent.append(spans / seconds)
        self.spool.write_rate(self.rate or 0.0)


def store(items: Sequence[Queued]) -> None:
    """Store queued bodies (one workspace, header and actor) in one go: their spans as the receiver
    mapped them, or decoded and mapped here for a body queued without its mapped part or whose
    traces content logs wait for (the engine's refusals are logged)."""
    first = items[0]
    workspace = Workspace.objects.filter(pk=first.workspace_id).first()
    if workspace is None:  # deleted since: its runs are gone too
        log.warning(
            "otlp queue: workspace %s is gone; %d queued bodies dropped", first.workspace_id, len(items)
        )
        return
    report = _store_mapped(workspace, items) if all(item.mapped for item in items) else None
    if report is None:
        report = _store_bodies(workspace, items)
    if report is not None and report.rejected:
        log.warning(
            "otlp queue: %s: %d span(s) refused after queueing: %s",
            ", ".join(item.path.name for item in items),
            report.rejected,
            report.message,
        )


def _store_mapped(workspace: Workspace, items: Sequence[Queued]) -> IngestReport | None:
    """The bodies' spans as the receiver mapped them (no decoding, no mapping again); None when
    content logs wait for one of their traces (they are joined onto the decoded spans first)."""
    spans: list[dict] = []
    mapped: list = []
    for item in items:
        try:
            facts, pairs = mapped_section(item.mapped or b"")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):  # (orjson's errors too)
            log.error("otlp queue: %s has a damaged mapped part; its body is mapped again", item.path.name)
            return None
        spans += facts
        mapped += pairs
    if pending_logs_for(workspace, {span["traceId"] for span in spans}):
        return None
    first = items[0]
    return do_ingest_mapped(
        workspace=workspace, spans=spans, mapped=mapped, header_run_id=first.header_run_id, actor=first.actor
    )


def _store_bodies(workspace: Workspace, items: Sequence[Queued]) -> IngestReport | None:
    """The bodies decoded and stored as a request stores them."""
    first = items[0]
    spans: list[dict] = []
    for item in items:
        try:
            spans += (
                spans_from_protobuf(item.body)
                if item.content_type == PROTOBUF
                else spans_from_json(item.body)
            )
        except ProtocolError as exc:  # the receiver decoded it: only a damaged file gets here
            log.error("otlp queue: %s no longer decodes (%s); dropped", item.path.name, exc.message)
    if not spans:
        return None
    return do_ingest_spans(
        workspace=workspace, spans=spans, header_run_id=first.header_run_id, actor=first.actor
    )


def _checkpoint_pages(sender: object, connection: object, **kwargs: object) -> None:
    """The worker's SQLite connection checkpoints its WAL past
    ``WORKBENCH_OTLP_WORKER_CHECKPOINT_PAGES`` pages only (SQLite's default is 1,000). A burst's
    batch writes 500-700 pages of runs and events, so with the default about every second batch
    paid a checkpoint (copying the WAL into the database, an fsync before and after): batches of
    the same work took 66-94 ms instead of 67-73 ms, and the receivers' window, which follows the
    slowest recent batch, waited for room it had. The queue's idle moments checkpoint instead
    (:func:`checkpoint_wal`)."""
    pages = settings.WORKBENCH_OTLP_WORKER_CHECKPOINT_PAGES
    if pages and getattr(connection, "vendor", None) == "sqlite":
        with connection.cursor() as cursor:  # type: ignore[attr-defined]
            cursor.execute(f"PRAGMA wal_autocheckpoint={int(pages)}")


def checkpoint_wal() -> tuple[int, int] | None:
    """Copy the WAL into the database now (SQLite, PASSIVE: never waits for a reader or a writer;
    the next write then starts the WAL from its beginning): the WAL's frames and how many of them
    are in the database now, or None (not SQLite, or the setting is 0). The worker calls it when
    its queue runs empty after storing."""
    if not (settings.WORKBENCH_OTLP_WORKER_CHECKPOINT_PAGES and connection.vendor == "sqlite"):
        return None
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")
        _busy, frames, copied = cursor.fetchone()
    return frames, copied


def prepare_process() -> None:
    """A worker process's start: what storing needs loaded now (the price snapshot, the protobuf
    runtime, the engine's schemas), then the heap settled (``runs.telemetry.gc_tuning``: every
    object so far frozen out of the garbage collector's scans, its youngest generation made
    larger). Storing allocates many short-lived objects per span; with Python's default threshold a full collection
    scanning all of Django landed in most batches (measured: +0.55 s on a 1.2 s pass of 10,000
    spans, and most of the pass-to-pass spread)."""
    from genai_prices import data_snapshot  # (loaded on first use otherwise)
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: F401

    data_snapshot.get_snapshot()  # the price data itself (26 ms), not in the first body's lag
    warm_worker()
    if settings.WORKBENCH_TRANSCRIPTS_OF_TRACES == "live":  # else a trace's file waits for a read
        transcript_log.keep_files_ready(READY_FILES)
    connection_created.connect(_checkpoint_pages, dispatch_uid="otlp_worker_checkpoint_pages")
    if connection.connection is not None:  # opened before the signal was connected: set it here too
        _checkpoint_pages(None, connection)
    settle_heap()


def run(
    *,
    spool: Spool | None = None,
    stop: threading.Event | None = None,
    parent: int | None = None,
    once: bool = False,
    journal: IO[str] | None = None,
    batch_spans: int | None = None,
) -> int:
    """Store queued bodies until ``stop`` is set, the ``parent`` process is gone or, with ``once``,
        the queue is empty. Returns how many bodies were stored. ``batch_spans``: bodies queued one after
    the other are stored together up to this many spans (``WORKBENCH_OTLP_WORKER_BATCH_SPANS``). ``journal``: a line per stored body
        (its name, its span count, the seconds it took and the wall-clock time it was stored), for measuring the lag."""
    spool = (spool or Spool()).ensure()
    batch_spans = settings.WORKBENCH_OTLP_WORKER_BATCH_SPANS if batch_spans is None else batch_spans
    meter = RateMeter(spool)
    spool.recover()
    recovered_at = time.monotonic()
    stored = 0
    idle_since: float | None = None
    wrote = False  # stored since the last checkpoint
    while stop is None or not stop.is_set():
        started = time.perf_counter()  # the claim counts in the rate too
        items = spool.claim_batch(batch_spans)
        if not items:
            if wrote:
                wrote = False
                try:
                    checkpoint_wal()
                except Exception:  # a busy database: the next idle moment (or SQLite) does it
                    log.exception("otlp queue: the WAL checkpoint failed")
            if once:
                break
            if parent is not None and os.getppid() != parent:
                break
            now = time.monotonic()
            idle_since = idle_since or now
            if now - recovered_at > RECOVER_EVERY:
                spool.recover()
                recovered_at = now
            if transcript_log.make_ready_files(32):  # 32 files: 0.5-11 ms, then a look at the queue
                continue
            time.sleep(0.002 if now - idle_since < 1.0 else 0.02)
            continue
        idle_since = None
        try:
            store(items)
        except Exception:  # a database hiccup: the bodies go back, counted
            log.exception("otlp queue: storing %s failed", ", ".join(item.path.name for item in items))
            for item in items:
                spool.give_back(item)
            close_old_connections()
            time.sleep(0.5)
            continue
        took = time.perf_counter() - started
        for item in items:
            spool.done(item)
            if journal is not None:
                journal.write(f"{item.path.name} {item.spans} {took:.6f} {time.time():.6f}\n")
        if journal is not None:
            journal.flush()
        stored += len(items)
        wrote = True
        meter.add(sum(item.spans for item in items), took)
    return stored


# --------------------------------------------------------------------------------------------
# The embedded profile's own worker


_lock = threading.Lock()
_proc: subprocess.Popen | None = None


def forward_changes(out: IO[str]) -> Callable[[RunChange], None]:
    """A listener writing each committed change to ``out`` as a JSON line (the worker's side)."""

    def forward(change: RunChange) -> None:
        line = json.dumps(
            [
                change.workspace_id,
                change.run_id,
                change.first_seq,
                change.last_seq,
                change.status,
                change.run_pk,
                change.may_hold_decision(),
            ]
        )
        out.write(line + "\n")
        out.flush()

    return forward


def _read_changes(stream: IO[str]) -> None:
    """The server's side: each line from its worker, handed to the server's listeners."""
    for line in stream:
        try:
            workspace_id, run_id, first, last, status, run_pk, decided = json.loads(line)
        except (ValueError, TypeError):
            continue
        dispatch_listeners(
            RunChange(workspace_id, run_id, first, last, status, run_pk, decided=bool(decided))
        )


def ensure_worker() -> subprocess.Popen | None:
    """Start this process's worker once (again if it died), when the settings ask for it."""
    global _proc
    if not (settings.WORKBENCH_OTLP_QUEUE and settings.WORKBENCH_OTLP_WORKER_INPROCESS):
        return None
    if _proc is not None and _proc.poll() is None:
        return _proc
    with _lock:
        if _proc is None or _proc.poll() is not None:
            forward = "InMemoryChannelLayer" in settings.CHANNEL_LAYERS["default"]["BACKEND"]
            command = [
                sys.executable,
                "-m",
                "workbench",  # the `workbench` command: there is no manage.py in an installed wheel
                "manage",
                "otlp_worker",
                "--parent",
                str(os.getpid()),
            ]
            if os.environ.get("WORKBENCH_OTLP_WORKER_JOURNAL"):  # the benchmark's lag figures
                command += ["--journal", os.environ["WORKBENCH_OTLP_WORKER_JOURNAL"]]
            _proc = subprocess.Popen(
                command + (["--forward-changes"] if forward else []),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                text=True,
                cwd=settings.HOME_DIR,
            )
            threading.Thread(
                target=_read_changes, args=(_proc.stdout,), name="otlp-worker-changes", daemon=True
            ).start()
    return _proc


def resume_queue() -> None:
    """Start this process's worker when bodies wait in the spool (a server that starts after a
    crash, a worker that died with no OTLP request since): queued spans never wait for the next
    request to be stored."""
    if settings.WORKBENCH_OTLP_QUEUE and settings.WORKBENCH_OTLP_WORKER_INPROCESS and Spool().pending_spans():
        ensure_worker()


def start_with_server() -> None:
    """What the server process does about its worker as it starts: with
    ``WORKBENCH_OTLP_WORKER_AT_START`` (the embedded profile's default: ``workbench serve`` and a
    bare ``daphne workbench.asgi:application`` alike) the worker is started now, so the first OTLP
    request does not wait for its start (about 2 s on a loaded machine); otherwise (set off, tests)
    only when spans wait in the spool (:func:`resume_queue`), else on the first OTLP request."""
    if settings.WORKBENCH_OTLP_WORKER_AT_START:
        ensure_worker()
    else:
        resume_queue()


def worker_pid() -> int | None:
    """The pid of this process's worker, if it runs (the benchmark reads its CPU time)."""
    return _proc.pid if _proc is not None and _proc.poll() is None else None


def stop_worker(timeout: float = 10) -> None:
    """Stop this process's worker (tests; the worker also ends with its server)."""
    global _proc
    if _proc is not None:
        _proc.terminate()
        try:
            _proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _proc.kill()
    _proc = None
