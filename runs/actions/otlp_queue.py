"""The OTLP queue (``WORKBENCH_OTLP_QUEUE``): ``POST /v1/traces`` answers once a request's spans
are checked and durably queued, and a worker process (``manage.py otlp_worker``; the embedded
profile's server starts one itself) stores them through :func:`runs.actions.otlp.do_ingest_spans`,
so receiving and storing run on two cores. Without the queue the request stores its spans before
it answers (the default of the scaled profile).

What a 2xx means with the queue: the body is on disk in the spool, and every span the answer
counts as accepted passed routing's checks. A protobuf body that parses, names no run and whose
spans all have valid ids and times is spooled as it came (:func:`do_queue_body`, issue 53: the
receiver's least work; the worker decodes and maps it). Any other body is decoded, routed and
mapped before the answer (:func:`do_queue_spans`: a span that cannot be, or that names a run the
workspace does not have, is refused and counted in the answer's ``partial_success``, as without
the queue) and spooled with what was mapped. A span
is queryable within about ``WORKBENCH_OTLP_QUEUE_SECONDS`` of its answer: the receiver answers only
while the queued work (spans waiting, divided by the worker's recent rate) fits in that window;
otherwise it waits for room, and after ``WORKBENCH_OTLP_QUEUE_WAIT_SECONDS`` answers ``503`` with
``Retry-After`` (OTLP exporters retry a 503), having queued nothing. The engine's own refusals (a
span for a run that ended meanwhile) happen in the worker, after the answer: they are logged.

The spool is a directory (``WORKBENCH_OTLP_SPOOL_DIR``):

* ``ready/<ns>-<pid>-<n>.<spans>.otlp``: queued bodies, oldest first by name. A body is written
  under ``tmp/`` and renamed into ``ready/`` (atomic: a worker never sees half a file);
* ``claimed/<name>.<worker pid>``: the body a worker is storing. A worker takes a body by renaming
  it (only one rename succeeds), and deletes it after its transaction committed. A worker that
  died leaves its claim behind: the next worker to start (or any worker, now and then) puts the
  claims of dead workers back in ``ready/``. Storing a body twice stores it once (a span's event
  ids come from its trace and span ids, and ingest skips the events a run already holds);
* ``failed/``: a body whose storing raised five times (a bug, a database down): kept for the
  operator, never retried on its own;
* ``rate``: the worker's recent rate (spans per second), what the receiver's window is computed
  from (``DEFAULT_RATE`` until a worker wrote one).

Directories are the server user's alone (0700, files 0600): bodies hold prompts and answers. A
body is written without fsync, as SQLite commits in the embedded profile (WAL, synchronous=NORMAL):
it survives a killed process, not a power cut.

Each file: one JSON line (the workspace's key, the ``X-Workbench-Run`` header, the actor, the
content type, the span count and ``mapped``, the length of the next part, when the receiver mapped
the body), then the spans as the receiver's check mapped them (JSON: each routed span's events and what routing reads of it, see
:func:`mapped_section`), then the body as it came (decompressed). The worker stores the mapped
part; it decodes and maps the body itself when the mapped part is missing (a body spooled as it
came, or a file of an earlier version) or content logs wait for the body's spans (they are joined onto the spans
before mapping).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any

import orjson
from django.conf import settings

from runs.actions.core import engine_context
from runs.actions.otlp import IngestReport
from runs.models import Run, Workspace
from runs.protocol.otlp_map import map_spans, reroute_unknown, route_spans, routing_facts, with_resources
from runs.protocol.values import new_id

log = logging.getLogger(__name__)

DEFAULT_RATE = 2_000.0  # spans/s assumed until a worker measured its own
SUFFIX = ".otlp"
MAX_ATTEMPTS = 5
_sequence = count()
_STAND_IN = f"{new_id('run')}_"  # + a number: the check's run id for each new trace
_ensured: set[Path] = set()


class QueueFull(Exception):
    """No room in the window for ``WORKBENCH_OTLP_QUEUE_WAIT_SECONDS``: nothing was queued."""


@dataclass(frozen=True)
class Queued:
    """A body a worker claimed."""

    path: Path
    workspace_id: int
    header_run_id: str | None
    actor: str
    content_type: str
    spans: int
    body: bytes
    mapped: bytes | None = None  # the receiver's mapped section (mapped_section), when it wrote one


class Spool:
    def __init__(self, root: Path | str | None = None) -> None:
        self.root = Path(root if root is not None else settings.WORKBENCH_OTLP_SPOOL_DIR)
        self.ready = self.root / "ready"
        self.claimed = self.root / "claimed"
        self.failed = self.root / "failed"
        self.tmp = self.root / "tmp"
        self._rate_cache: tuple[float, float] = (0.0, DEFAULT_RATE)  # (read at, rate)

    def ensure(self) -> Spool:
        if self.root not in _ensured or not self.tmp.is_dir():
            for folder in (self.ready, self.claimed, self.failed, self.tmp):
                folder.mkdir(parents=True, exist_ok=True, mode=0o700)  # bodies hold prompts and answers
            _ensured.add(self.root)
        return self

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
        mapped: bytes | None = None,
    ) -> Path:
        name = f"{time.time_ns():020d}-{os.getpid()}-{next(_sequence)}.{spans}{SUFFIX}"
        head: dict[str, Any] = {
            "workspace": workspace_id,
            "run": header_run_id,
            "actor": actor,
            "contentType": content_type,
            "spans": spans,
        }
        if mapped is not None:
            head["mapped"] = len(mapped)
        staged = self.tmp / name
        with os.fdopen(os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
            out.write(json.dumps(head).encode() + b"\n")
            if mapped is not None:
                out.write(mapped)
            out.write(body)
        target = self.ready / name
        os.replace(staged, target)
        return target

    def pending_spans(self) -> int:
        """The spans queued or being stored."""
        total = 0
        for folder in (self.ready, self.claimed):
            try:
                names = os.listdir(folder)
            except FileNotFoundError:
                continue
            for name in names:
                total += _spans_of(name)
        return total

    def status(self) -> dict[str, Any]:
        """What waits in the spool: bodies and spans queued, claimed and failed, the worker's rate."""
        out: dict[str, Any] = {"spool": str(self.root)}
        for key, folder in (("queued", self.ready), ("claimed", self.claimed), ("failed", self.failed)):
            names = os.listdir(folder) if folder.is_dir() else []
            out[key] = {"bodies": len(names), "spans": sum(_spans_of(n) for n in names)}
        out["rate"] = self.rate() if (self.root / "rate").exists() else None
        return out

    def rate(self) -> float:
        """The worker's recent rate (spans/s), read at most every 0.05 s."""
        read_at, rate = self._rate_cache
        now = time.monotonic()
        if now - read_at < 0.05:
            return rate
        try:
            rate = max(1.0, float((self.root / "rate").read_text()))
        except (FileNotFoundError, ValueError):
            rate = DEFAULT_RATE
        self._rate_cache = (now, rate)
        return rate

    def wait_for_room(self, spans: int, window: float, wait: float) -> None:
        """Return when ``spans`` more fit in the window (always when nothing is queued); raise
        :class:`QueueFull` after ``wait`` seconds."""
        started = time.monotonic()
        deadline = started + wait
        while True:
            pending = self.pending_spans()
            if pending == 0 or (pending + spans) / self.rate() <= window:
                return
            now = time.monotonic()
            if now >= deadline:
                raise QueueFull(f"{pending} spans are waiting to be stored")
            # Room comes when the worker finishes a batch (every 0.1-0.2 s in a burst): a look every
            # 2 ms (two directory listings, ~40 us) answers within 2 ms of it; after a second of
            # waiting (a worker stuck or gone) every 20 ms.
            time.sleep(0.002 if now - started < 1.0 else 0.02)

    # -- the worker's side

    def claim_next(self, pid: int | None = None) -> Queued | None:
        """The oldest queued body, renamed into ``claimed/`` for this worker; None when none is."""
        batch = self.claim_batch(0, pid)
        return batch[0] if batch else None

    def claim_batch(self, max_spans: int, pid: int | None = None) -> list[Queued]:
        """The oldest queued body and, while they hold fewer than ``max_spans`` spans together, the
        next ones of the same workspace, header and actor (stored in one go: one transaction per
        run for all of them); each renamed into ``claimed/`` for this worker."""
        pid = pid or os.getpid()
        try:
            names = sorted(n for n in os.listdir(self.ready) if n.endswith(SUFFIX))
        except FileNotFoundError:
            return []
        batch: list[Queued] = []
        spans = 0
        for name in names:
            if batch and spans + _spans_of(name) > max_spans:
                break
            target = self.claimed / f"{name}.{pid}"
            try:
                os.rename(self.ready / name, target)
            except FileNotFoundError:
                continue  # another worker took it
            item = _read(target)
            if batch and (item.workspace_id, item.header_run_id, item.actor) != (
                batch[0].workspace_id,
                batch[0].header_run_id,
                batch[0].actor,
            ):
                os.rename(target, self.ready / name)  # not this batch's: back, in its place
                break
            batch.append(item)
            spans += item.spans
        return batch

    def done(self, item: Queued) -> None:
        item.path.unlink(missing_ok=True)

    def give_back(self, item: Queued) -> None:
        """A body whose storing raised: back in ``ready/`` (its name counts the attempt), or into
        ``failed/`` after :data:`MAX_ATTEMPTS`."""
        base = item.path.name.rsplit(".", 1)[0]  # without the worker's pid
        attempts = _attempts(base) + 1
        if attempts >= MAX_ATTEMPTS:
            os.replace(item.path, self.failed / base)
            log.error("otlp queue: %s failed %d times, kept in %s", base, attempts, self.failed)
            return
        stem, spans, _ext = base.rsplit(".", 2)
        stem = stem.split("~", 1)[0]
        os.replace(item.path, self.ready / f"{stem}~{attempts}.{spans}{SUFFIX}")

    def recover(self) -> int:
        """Put the claims of workers that are gone back in ``ready/``; how many."""
        moved = 0
        try:
            names = os.listdir(self.claimed)
        except FileNotFoundError:
            return 0
        for name in names:
            base, _, pid = name.rpartition(".")
            if not pid.isdigit() or process_alive(int(pid)):
                continue
            try:
                os.rename(self.claimed / name, self.ready / base)
                moved += 1
            except FileNotFoundError:
                continue
        return moved

    def write_rate(self, rate: float) -> None:
        staged = self.tmp / f"rate.{os.getpid()}"
        staged.write_text(f"{rate:.1f}")
        os.replace(staged, self.root / "rate")


def _spans_of(name: str) -> int:
    parts = name.split(".")
    if len(parts) >= 3 and parts[-2].isdigit() and parts[-1] != "tmp":
        return int(parts[-2])
    if len(parts) >= 4 and parts[-3].isdigit():  # a claim: <name>.<spans>.otlp.<pid>
        return int(parts[-3])
    return 0


def _attempts(base: str) -> int:
    stem = base.rsplit(".", 2)[0]
    _, tilde, tries = stem.partition("~")
    return int(tries) if tilde and tries.isdigit() else 0


def process_alive(pid: int) -> bool:
    """True while a process with this pid exists (one of another user's counts too): a claim, or
    a worker's transcript files made ahead (runs.telemetry.transcript_log), is taken back once
    its process is gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read(path: Path) -> Queued:
    data = path.read_bytes()
    head_line, _, body = data.partition(b"\n")
    head: dict[str, Any] = json.loads(head_line)
    mapped = None
    size = head.get("mapped")
    if type(size) is int and 0 < size <= len(body):
        mapped, body = body[:size], body[size:]
    return Queued(
        path=path,
        workspace_id=int(head["workspace"]),
        header_run_id=head.get("run"),
        actor=str(head.get("actor") or "otlp"),
        content_type=str(head["contentType"]),
        spans=int(head["spans"]),
        body=body,
        mapped=mapped,
    )


# --------------------------------------------------------------------------------------------
# The receiver's check and queueing


def check_spans(workspace: Workspace, spans: Sequence[dict], header_run_id: str | None) -> IngestReport:
    """What :func:`runs.actions.otlp.do_ingest_spans` would accept and refuse before the engine:
    each span routed and mapped (new traces under a stand-in run id), the runs spans name looked
    up in the workspace. Writes nothing."""
    return check_and_map(workspace, spans, header_run_id)[0]


def check_and_map(
    workspace: Workspace, spans: Sequence[dict], header_run_id: str | None
) -> tuple[IngestReport, dict[str, Any]]:
    """:func:`check_spans`, and what the worker needs of the spans it would store (their mapped
    events and what routing reads of them: :func:`mapped_section`, serialised by
    :func:`dump_section`). The spool's receiver and the Redis Stream's (``otlp_streams``) both
    queue this."""
    routes, _traces = route_spans(spans, header_run_id)
    named = {r.run_id for r in routes if r is not None and r.run_id is not None}
    held = (
        set(Run.objects.filter(workspace=workspace, run_id__in=named).values_list("run_id", flat=True))
        if named
        else set()
    )
    routes = reroute_unknown(routes, held)  # a span inheriting an unknown run goes to its trace's own
    stand_in: dict[str, str] = {}  # trace id -> a run id for the check (the worker picks the real one)
    kept: list[dict] = []
    run_ids: list[str | None] = []
    missing: dict[str, int] = {}
    for span, route in zip(spans, routes, strict=True):
        if route is not None and route.run_id is not None and route.run_id not in held:
            missing[route.run_id] = missing.get(route.run_id, 0) + 1
            continue
        kept.append(span)
        if route is None:
            run_ids.append(None)
        else:
            if route.run_id is None and route.trace_id not in stand_in:
                stand_in[route.trace_id] = f"{_STAND_IN}{len(stand_in)}"
            run_ids.append(route.run_id or stand_in[route.trace_id])
    pairs: list = []
    batch = map_spans(kept, run_ids, validate=True, checked=True, mapped=pairs)
    report = IngestReport(
        accepted=batch.accepted_spans + sum(missing.values()),
        rejected=batch.rejected_spans,
        message=batch.message,
    )
    for run_id, n in missing.items():
        report.refuse(n, f"no run {run_id!r} in this workspace")
    # the spans routing accepted (a span it refused has no run id), with their events, if mapped
    routed = [i for i, run_id in enumerate(run_ids) if run_id is not None]
    facts, resources = routing_facts([kept[i] for i in routed])
    section = {"resources": resources, "spans": [[f, pairs[i]] for f, i in zip(facts, routed, strict=True)]}
    return report, section


def do_queue_spans(
    *,
    workspace: Workspace,
    spans: Sequence[dict],
    body: bytes,
    content_type: str,
    header_run_id: str | None = None,
    actor: str = "otlp",
    spool: Spool | None = None,
) -> IngestReport:
    """Check the spans (:func:`check_spans`), wait for room in the window and queue the body
    with what the check mapped (:func:`mapped_section`). Raises :class:`QueueFull` (nothing
    queued) when no room came in time."""
    report, section = check_and_map(workspace, spans, header_run_id)
    if report.accepted <= 0:
        return report
    spool = (spool or Spool()).ensure()
    spool.wait_for_room(
        report.accepted, settings.WORKBENCH_OTLP_QUEUE_SECONDS, settings.WORKBENCH_OTLP_QUEUE_WAIT_SECONDS
    )
    spool.put(
        workspace_id=workspace.pk,
        body=body,
        content_type=content_type,
        spans=report.accepted,
        header_run_id=header_run_id,
        actor=actor,
        mapped=dump_section(section),
    )
    return report


def do_queue_body(
    *,
    workspace: Workspace,
    body: bytes,
    content_type: str,
    spans: int,
    actor: str = "otlp",
    spool: Spool | None = None,
) -> IngestReport:
    """Queue a body as it came, with no mapped part (the worker decodes, routes and maps it):
    the receiver's least work for a body :func:`runs.telemetry.otlp_ingest.spoolable_protobuf_spans`
    passed (it parses, names no run, no span would be refused by routing). Waits for room in the
    window as :func:`do_queue_spans` does; raises :class:`QueueFull` (nothing queued)."""
    report = IngestReport(accepted=spans)
    if spans <= 0:
        return report
    spool = (spool or Spool()).ensure()
    spool.wait_for_room(
        spans, settings.WORKBENCH_OTLP_QUEUE_SECONDS, settings.WORKBENCH_OTLP_QUEUE_WAIT_SECONDS
    )
    spool.put(
        workspace_id=workspace.pk,
        body=body,
        content_type=content_type,
        spans=spans,
        header_run_id=None,
        actor=actor,
    )
    return report


def dump_section(section: dict[str, Any]) -> bytes | None:
    try:
        return orjson.dumps(section)
    except (orjson.JSONEncodeError, TypeError):  # not expected: the events were checked
        log.warning("otlp queue: mapped spans not serialisable; the worker maps the body")
        return None  # the worker then decodes and maps the body itself


def mapped_section(data: bytes) -> tuple[list[dict[str, Any]], list[list | None]]:
    """A queued body's mapped section read back: the spans as :func:`route_spans` reads them
    (:func:`runs.protocol.otlp_map.routing_facts`, resources joined back on) and each span's
    ``[time, event]`` pairs (None: refused by the check). The receiver wrote it from the spans
    it checked, so the worker routes and stores them without decoding and mapping the body
    again (the events were validated there)."""
    doc = orjson.loads(data)
    entries = doc["spans"]
    spans = with_resources([entry[0] for entry in entries], doc["resources"])
    return spans, [entry[1] for entry in entries]


def warm_worker() -> None:
    """What a worker process loads before its first body (so that body's lag does not pay for it):
    the engine's compiled schemas."""
    engine_context()
