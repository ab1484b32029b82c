"""Live transcripts (seed 003): every committed event appended to its run's JSONL file.

``var/transcripts/<name>.jsonl`` (``settings.WORKBENCH_TRANSCRIPT_DIR``), one file per run, mode
0600, opened ``O_APPEND``, the lines of one commit in one ``write()`` (under the file's lock).
Lines are those of :mod:`runs.protocol.transcript` (the seed's closed vocabulary, UTC
timestamps, ``event_seq`` naming the stored event).

When: :func:`record_change` is the first thing that runs after a commit (``runs.actions.notify`` calls
its durable sinks before any listener), so a line is on disk before the websocket broadcast of
the same events. A failure to write is logged and never undoes the committed write.

Order and completeness: appends to one file hold an exclusive ``flock``. Under it the recorder
reads the file's last line (the last ``seq`` and ``event_seq`` written) and appends every stored
event after that one, read from the database. So two processes committing to the same run in
quick succession cannot interleave or reorder lines, a change seen twice writes nothing twice,
and a run recorded before this feature existed catches up on its first new event.

Lineage: a run with parents starts with ``run.started`` carrying ``parent_run_id`` (as every one
of its lines does); each parent's file gets ``step.call_workflow.started`` with ``child_run_id``
when the child is first recorded, and ``step.call_workflow.completed`` when it ends.

File names: run ids may hold any character and are unique per workspace only, so a name is the
id's filename-safe prefix plus a hash of (workspace, run id, creation time) -- a run deleted and
created again gets a fresh file. ``index.jsonl`` beside the files lists ``{file, workspace,
run_id, created_at}`` for every file (appended once, when the file is created).

Deletion: a transcript holds what people wrote and models answered, so it goes with its run.
Deleting a run (its ``RunChange`` with status ``deleted``) removes the run's file and its
``index.jsonl`` line; :func:`sweep_orphans` (run by ``manage.py prune_replay_data`` and the replay
worker's hourly retention pass) removes the files of runs that are gone some other way (a deleted
workspace, a write that raced the deletion).

Made ahead: a process that creates many files in bursts (the OTLP worker: a run per trace) keeps
empty ones made while it was idle (:func:`keep_files_ready`, :func:`make_ready_files`) in
``.pool/<pid>/`` inside the directory, and a new run's file is such a file linked into place
(``link``: never over a file that exists; then the pool's name unlinked). Creating a file costs the
file system an inode, which on this machine's ext4 took 16-340 us depending on what had been
deleted lately; a link takes a directory entry only. A process only takes files from its own
pool (two processes linking one file would share it); the pools of processes that are gone are
removed by the next process that keeps one.

Followers: :func:`follow` yields a file's lines as they are appended (the API's
``transcript.jsonl?follow=true`` and ``manage.py transcript RUN --follow`` use it). When the server
shuts down, :func:`close_followers` ends every follow at its next poll (the stream ends cleanly;
a follower reconnects with ``after_seq``); :func:`active_followers` says how many are still open.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import repeat
from pathlib import Path
from typing import Any

import orjson
from django.conf import settings

from runs.actions.notify import RunChange
from runs.actions.otlp_queue import process_alive
from runs.models import Event, Run
from runs.protocol.redaction import event_redactor, policy_of, redact_run_doc
from runs.protocol.transcript import TERMINAL, event_lines, line_bytes, parent_ids, utc
from runs.selectors.runs import find_run

log = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_CHUNK = 2000
_TAIL_BYTES = 1 << 16


def transcript_dir() -> Path:
    return Path(settings.WORKBENCH_TRANSCRIPT_DIR)


@functools.lru_cache(maxsize=4096)  # pure; asked twice for each new file (its lines, the index)
def file_name(workspace_id: Any, run_id: str, created_at: Any) -> str:
    """``<safe prefix of the run id>~<hash>.jsonl``: unique per (workspace, run, creation)."""
    prefix = _UNSAFE.sub("_", run_id)[:80].lstrip(".") or "run"
    key = f"{workspace_id}\x00{run_id}\x00{created_at.isoformat() if created_at else ''}"
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{prefix}~{digest}.jsonl"


def transcript_path(run) -> Path:
    return transcript_dir() / file_name(run.workspace_id, run.run_id, run.created_at)


def _file_path(run, directory: str) -> str:
    """:func:`transcript_path` as text, in ``directory`` (read once for many runs)."""
    return os.path.join(directory, file_name(run.workspace_id, run.run_id, run.created_at))


class _ReadyFiles:
    """This process's empty files made ahead (see the module's docstring)."""

    def __init__(self, root: str, size: int) -> None:
        self.root = root
        self.folder = os.path.join(root, str(os.getpid()))
        self.size = size
        self.names: list[str] = []
        self.made = 0

    def make(self, limit: int) -> int:
        """Make up to ``limit`` more files (fewer once ``size`` are ready); how many were made."""
        if len(self.names) >= self.size:
            return 0
        if not self.made:
            _remove_gone_pools(self.root)
            shutil.rmtree(self.folder, ignore_errors=True)  # a pid used again: the old files are not ours
            for folder in (os.path.dirname(self.root), self.root, self.folder):  # each 0700, as the files'
                os.makedirs(folder, mode=0o700, exist_ok=True)
        made = 0
        while made < limit and len(self.names) < self.size:
            self.made += 1
            name = os.path.join(self.folder, str(self.made))
            os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            self.names.append(name)
            made += 1
        return made

    def place(self, path: str) -> None:
        """One ready file linked at ``path`` when nothing is there yet (else nothing happens)."""
        if not self.names:
            return
        name = self.names[-1]
        try:
            os.link(name, path)
        except FileExistsError:
            return
        except OSError:  # a file system without hard links, the pool removed meanwhile: create instead
            self.names.clear()
            return
        self.names.pop()
        os.unlink(name)


def _remove_gone_pools(root: str) -> None:
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return
    for name in names:
        if name.isdigit() and int(name) != os.getpid() and not process_alive(int(name)):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


_ready: _ReadyFiles | None = None


def keep_files_ready(size: int) -> None:
    """From now on this process keeps up to ``size`` empty files made ahead for new runs' files
    (:func:`make_ready_files` makes them; nothing is made here)."""
    global _ready
    _ready = _ReadyFiles(str(transcript_dir() / ".pool"), size) if size > 0 else None


def make_ready_files(limit: int = 64) -> int:
    """Make up to ``limit`` of the files :func:`keep_files_ready` asked for (a caller with nothing
    else to do calls it); how many were made. A failure to make them is logged once and ends it."""
    global _ready
    if _ready is None or not getattr(settings, "WORKBENCH_TRANSCRIPTS", True):
        return 0
    try:
        return _ready.make(limit)
    except OSError as exc:
        log.warning("transcripts: no files made ahead (%s)", exc)
        _ready = None
        return 0


@contextmanager
def _locked(path: Path | str) -> Iterator[int]:
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT
    try:
        fd = os.open(path, flags, 0o600)
    except FileNotFoundError:  # the directory first (once: not a mkdir per append)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(path, flags, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # releases the lock


def _last_line(fd: int) -> dict | None:
    size = os.fstat(fd).st_size
    if size == 0:
        return None
    start = max(0, size - _TAIL_BYTES)
    while True:
        data = os.pread(fd, size - start, start)
        lines = data.rstrip(b"\n").rsplit(b"\n", 1)
        if len(lines) == 2 or start == 0:
            try:
                return orjson.loads(lines[-1])
            except orjson.JSONDecodeError:  # a torn last line (crash mid-write): start over after it
                return None
        start = max(0, start - _TAIL_BYTES * 4)


def _append(fd: int, lines: list[bytes]) -> None:
    """The lines in one ``write()`` (O_APPEND, under the file's lock: whole lines, in order; a
    follower holds back a partial last line until its newline arrives)."""
    if not lines:
        return
    data = memoryview(b"".join(lines))
    while data:
        data = data[os.write(fd, data) :]


class _Writer:
    """Numbers lines after the file's last one and carries the run's lineage fields."""

    def __init__(self, run_id: str, parents: list[str], last: dict | None) -> None:
        self.run_id = run_id
        self.parent = parents[0] if parents else None
        self.seq = int(last["seq"]) if last else 0
        self.lines: list[bytes] = []
        self._utc: dict[str, str] = {}  # ts -> its UTC text (a span's events share their instants)

    def utc_of(self, ts: Any) -> str:
        utc_ts = self._utc.get(ts) if type(ts) is str else None
        if utc_ts is None:
            utc_ts = utc(ts)
            if type(ts) is str:
                self._utc[ts] = utc_ts
        return utc_ts

    def line(
        self,
        kind: str,
        payload: dict,
        *,
        ts: str,
        path: str = "",
        event_seq: int | None = None,
        event_id: str | None = None,
        child_run_id: str | None = None,
    ) -> None:
        self.seq += 1
        self.lines.append(
            line_bytes(
                self.seq,
                self.run_id,
                path,
                self.utc_of(ts),
                kind,
                payload,
                event_seq,
                event_id,
                child_run_id,
                self.parent,
            )
        )


def _started_payload(doc: dict, parents: list[str]) -> dict:
    started: dict[str, Any] = {
        "workflow_id": doc.get("workflowId"),
        "workflow_version": doc.get("workflowVersion"),
    }
    for key in ("subject", "tags", "metadata"):
        if doc.get(key) is not None:
            started[key] = doc[key]
    if parents:
        started["parent_run_ids"] = parents
        forked_from = (doc.get("context") or {}).get("forkedFromStepId")
        if forked_from:
            started["forked_from_step_id"] = forked_from
    return started


def _lines_of(
    writer: _Writer, rows, ended: bool, completed: bool, redact: Callable[[dict], dict] | None = None
) -> tuple[int | None, bool, bool]:
    """Write the lines of ``(seq, event, actor)`` rows; the last seq written and the end flags.
    (:meth:`_Writer.line` inlined: an event's lines share its path, id and UTC instant.)"""
    seq = None
    lines, run_id, parent, utc_of = writer.lines, writer.run_id, writer.parent, writer.utc_of
    number = writer.seq
    try:
        for seq, event, actor in rows:
            if redact is not None:
                event = redact(event)
            ts, path, event_id = event.get("ts", ""), event.get("stepId") or "", event.get("id")
            utc_ts = None
            for kind, payload in event_lines(event, actor):
                if kind == "run.completed":
                    ended = completed = True
                if utc_ts is None:
                    utc_ts = utc_of(ts)
                number += 1
                lines.append(
                    line_bytes(number, run_id, path, utc_ts, kind, payload, seq, event_id, None, parent)
                )
    finally:
        writer.seq = number
    return seq, ended, completed


def sync_run(run, change: RunChange | None = None, *, new_files: list | None = None) -> tuple[bool, bool]:
    """Append what the run's file lacks; ``(started, completed)``: whether this call wrote the
    file's ``run.started`` / ``run.completed`` line. A ``change`` that carries its committed
    events, and starts right after the file's last one, is written from memory. ``new_files``:
    a run whose file this call starts is put there for the caller to register in the index
    (:func:`_register_many`, one index write for many) instead of registered here."""
    started, completed, _parents = _sync(run, change, new_files, str(transcript_dir()))
    return started, completed


def _sync(
    run, change: RunChange | None, new_files: list | None, directory: str
) -> tuple[bool, bool, list[str]]:
    """:func:`sync_run` in ``directory``; also the run's parents (read from its document)."""
    doc = run.run_doc
    parents = parent_ids(doc)
    # A run that carries a redaction policy is written as the policy lets it out (its stored
    # events already are; this also covers a bundle redacted by an older, narrower policy).
    policy = policy_of(doc)
    redact = event_redactor(policy) if policy is not None else None
    if policy is not None:
        doc = redact_run_doc(doc, policy)
    started = completed = False
    path = _file_path(run, directory)
    if _ready is not None and change is not None and change.first_seq <= 1:
        _ready.place(path)  # a new run: its file made ahead, when one is ready
    with _locked(path) as fd:
        last = _last_line(fd)
        writer = _Writer(run.run_id, parents, last)
        after = int(last.get("event_seq") or 0) if last else 0
        if last is None:
            writer.line("run.started", _started_payload(doc, parents), ts=doc.get("startedAt", ""))
            started = True
            if new_files is None:
                _register(run=run)
            else:
                new_files.append(run)
        ended = last is not None and last.get("type") == "run.completed"
        if change is not None and change.events and change.first_seq == after + 1:
            rows = zip(range(change.first_seq, change.last_seq + 1), change.events, repeat(change.actor))
            _, ended, completed = _lines_of(writer, rows, ended, completed, redact)
        else:
            while True:
                stored = list(
                    Event.objects.filter(run=run, seq__gt=after)
                    .order_by("seq")
                    .values_list("seq", "body", "actor")[:_CHUNK]
                )
                seq, ended, completed = _lines_of(
                    writer,
                    ((seq, orjson.loads(body), actor) for seq, body, actor in stored),
                    ended,
                    completed,
                    redact,
                )
                after = seq if seq is not None else after
                _append(fd, writer.lines)
                writer.lines = []
                if len(stored) < _CHUNK:
                    break
        if not ended and run.status in TERMINAL:
            # e.g. an imported run that ends without a status event: its document says how it ended
            writer.line(
                "run.completed", {"status": run.status, "synthesized": True}, ts=doc.get("endedAt") or ""
            )
            completed = True
        _append(fd, writer.lines)
    return started, completed, parents


def _index_path() -> Path:
    return transcript_dir() / "index.jsonl"


def _index_entry(run) -> bytes:
    entry = {
        "file": file_name(run.workspace_id, run.run_id, run.created_at),
        "workspace": run.workspace_id,
        "run_id": run.run_id,
        "created_at": run.created_at.isoformat() if run.created_at else None,
    }
    return orjson.dumps(entry) + b"\n"


def _register(*, run) -> None:
    with _locked(_index_path()) as fd:  # the lock: a removal rewrites the index in place
        os.write(fd, _index_entry(run))


def _register_many(runs: list) -> None:
    if runs:
        with _locked(_index_path()) as fd:
            os.write(fd, b"".join(_index_entry(run) for run in runs))


def _entries(fd: int) -> list[tuple[bytes, dict | None]]:
    size = os.fstat(fd).st_size
    out: list[tuple[bytes, dict | None]] = []
    for raw in os.pread(fd, size, 0).split(b"\n") if size else ():
        if raw:
            try:
                entry = orjson.loads(raw)
            except orjson.JSONDecodeError:
                entry = None
            out.append((raw, entry if isinstance(entry, dict) else None))
    return out


def _remove_entries(doomed) -> int:
    """Under the index lock: delete the files of the index entries ``doomed(entries)`` names and
    rewrite the index without their lines. Returns how many files were removed."""
    index = _index_path()
    if not index.exists():
        return 0
    removed = 0
    with _locked(index) as fd:
        entries = _entries(fd)
        gone = doomed([entry for _, entry in entries if entry is not None])
        if not gone:
            return 0
        for name in gone:
            path = transcript_dir() / name
            if path.name == name and name != index.name:  # a bare file name of this directory
                try:
                    path.unlink()
                    removed += 1
                except FileNotFoundError:
                    pass
        kept = [raw + b"\n" for raw, entry in entries if entry is None or entry.get("file") not in gone]
        os.ftruncate(fd, 0)
        _append(fd, kept)  # O_APPEND after the truncation: from offset 0
    return removed


def forget_run(workspace_id: Any, run_id: str) -> int:
    """Remove every transcript file the index lists for (workspace, run id), and their lines."""
    return _remove_entries(
        lambda entries: {
            e.get("file")
            for e in entries
            if e.get("workspace") == workspace_id and e.get("run_id") == run_id and e.get("file")
        }
    )


def sweep_orphans() -> int:
    """Remove the transcripts of runs that no longer exist; returns how many files went."""

    def orphans(entries: list[dict]) -> set[str]:
        by_workspace: dict[Any, set[str]] = {}
        for e in entries:
            by_workspace.setdefault(e.get("workspace"), set()).add(str(e.get("run_id")))
        live: set[str] = set()
        for workspace_id, run_ids in by_workspace.items():
            rows = Run.unscoped.filter(workspace_id=workspace_id, run_id__in=run_ids).values_list(
                "run_id", "created_at"
            )
            live.update(file_name(workspace_id, rid, created) for rid, created in rows)
        return {e["file"] for e in entries if e.get("file") and e["file"] not in live}

    return _remove_entries(orphans)


def _mark_parents(run, kind: str, parents: list[str] | None = None) -> None:
    """Append a call_workflow line about ``run`` to each parent's file (same workspace).
    ``parents``: the run's, when the caller has read them (none: nothing to read again)."""
    if parents is not None and not parents:
        return
    doc = run.run_doc
    for parent_id in parent_ids(doc):
        parent = find_run(run.workspace, parent_id)
        if parent is None:
            continue  # a parent in no workspace of ours (an imported lineage): nothing to link
        sync_run(parent)  # its own events first, so the marker lands after them
        payload: dict[str, Any] = {"child_run_id": run.run_id}
        if kind == "step.call_workflow.started":
            payload["workflow_id"] = run.workflow_id
            ts = doc.get("startedAt", "")
        else:
            payload["status"] = run.status
            ts = doc.get("endedAt") or doc.get("startedAt", "")
        with _locked(transcript_path(parent)) as fd:
            parent_doc = parent.run_doc
            writer = _Writer(parent.run_id, parent_ids(parent_doc), _last_line(fd))
            writer.line(
                kind, payload, ts=ts, path=(doc.get("context") or {}).get("forkedFromStepId") or "",
                child_run_id=run.run_id,
            )  # fmt: skip
            _append(fd, writer.lines)


# What sync_run reads of a run row: the engine state (large for a long trace) stays in the database.
_ROW_FIELDS = ("id", "workspace_id", "run_id", "workflow_id", "status", "doc", "created_at")


def _written_on_read(run, directory: str) -> bool:
    """Whether a change of ``run`` leaves its file alone: the run an OTLP trace became (its
    ``metadata.otel``) whose transcript nobody has read yet. Its events hold its content already;
    the file is written, from them, by the first read (:func:`sync_run` before every read and
    follow) and kept live from then on (issue 53: a span's content is stored once, not again in
    a file per trace nobody opens). ``WORKBENCH_TRANSCRIPTS_OF_TRACES=live`` writes them as
    every other run's."""
    if getattr(settings, "WORKBENCH_TRANSCRIPTS_OF_TRACES", "read") != "read":
        return False
    metadata = (run.run_doc or {}).get("metadata")
    otel = metadata.get("otel") if isinstance(metadata, dict) else None
    return isinstance(otel, dict) and "traceId" in otel and not os.path.exists(_file_path(run, directory))


def record_change(change: RunChange) -> None:
    """The durable sink ``runs.actions.notify`` calls after every commit, before any listener."""
    if change.status == "deleted":  # whether or not transcripts are recorded now
        forget_run(change.workspace_id, change.run_id)
        return
    if not getattr(settings, "WORKBENCH_TRANSCRIPTS", True):
        return

    run = change.row
    if run is None and change.workspace_id is not None:
        run = (
            Run.unscoped.filter(workspace_id=change.workspace_id, pk=change.run_pk).only(*_ROW_FIELDS).first()
        )
    if run is None or _written_on_read(run, str(transcript_dir())):
        return
    started, completed, parents = _sync(run, change, None, str(transcript_dir()))
    if started:
        _mark_parents(run, "step.call_workflow.started", parents)
    if completed:
        _mark_parents(run, "step.call_workflow.completed", parents)


def record_changes(changes) -> None:
    """:func:`record_change` for the changes of one commit (many runs): one query for the rows
    the changes do not carry (``RunChange.row``), one index write for the files they start.
    Registered as the sink's batch form."""
    simple = [c for c in changes if c.status != "deleted"]
    for change in changes:
        if change.status == "deleted":
            record_change(change)
    if not simple or not getattr(settings, "WORKBENCH_TRANSCRIPTS", True):
        return
    rows = {(c.workspace_id, c.run_pk): c.row for c in simple if c.row is not None}
    unread = {c.run_pk for c in simple if c.row is None}
    if unread:
        rows.update(
            ((run.workspace_id, run.pk), run) for run in Run.unscoped.filter(pk__in=unread).only(*_ROW_FIELDS)
        )
    new_files: list = []
    directory = str(transcript_dir())
    try:
        for change in simple:
            run = rows.get((change.workspace_id, change.run_pk))
            if run is None or _written_on_read(run, directory):
                continue
            started, completed, parents = _sync(run, change, new_files, directory)
            if started:
                _mark_parents(run, "step.call_workflow.started", parents)
            if completed:
                _mark_parents(run, "step.call_workflow.completed", parents)
    finally:
        _register_many(new_files)


class _Tail:
    """Complete new lines of a growing file (no lock: writers append whole lines)."""

    def __init__(self, path: Path, after_seq: int) -> None:
        self.path = path
        self.after_seq = after_seq
        self.offset = 0
        self.pending = b""
        self.finished = False

    def read(self) -> list[bytes]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            data = b""
        self.offset += len(data)
        self.pending += data
        *complete, self.pending = self.pending.split(b"\n")
        out = []
        for raw in complete:
            if not raw:
                continue
            try:
                line = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if int(line.get("seq", 0)) > self.after_seq:
                out.append(raw + b"\n")
            self.finished = self.finished or line.get("type") == "run.completed"
        return out


_closing = threading.Event()  # set once: the server is shutting down
_followers = 0  # follows open in this process (ASGI)
_followers_lock = threading.Lock()


def close_followers() -> None:
    """End every follow of this process at its next poll (server shutdown)."""
    _closing.set()


def active_followers() -> int:
    return _followers


def _count_follower(delta: int) -> None:
    global _followers
    with _followers_lock:
        _followers += delta


async def afollow(path: Path, *, after_seq: int = 0, deadline: float, poll: float = 0.25):
    """:func:`follow` for ASGI responses: reads off the event loop, sleeps with asyncio; ends
    at the run's end, at ``deadline``, or when the server shuts down (:func:`close_followers`)."""
    import asyncio

    from asgiref.sync import sync_to_async

    tail = _Tail(path, after_seq)
    _count_follower(+1)
    try:
        while not _closing.is_set():
            for raw in await sync_to_async(tail.read, thread_sensitive=False)():
                yield raw
            if tail.finished or time.monotonic() >= deadline or _closing.is_set():
                return
            await asyncio.sleep(poll)
    finally:
        _count_follower(-1)


def follow(path: Path, *, after_seq: int = 0, poll: float = 0.25, until=None) -> Iterator[bytes]:
    """Lines of ``path`` with ``seq > after_seq``, then each new line as it is appended.

    After each read to the file's end, stops when ``until(finished)`` is true (``finished``:
    the run's ``run.completed`` line was seen); without ``until`` it stops at ``run.completed``.
    A partial last line is held back until its newline arrives. Readers take no lock.
    """
    tail = _Tail(path, after_seq)
    while True:
        yield from tail.read()
        if until(tail.finished) if until is not None else tail.finished:
            return
        time.sleep(poll)
