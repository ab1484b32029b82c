"""Importing a large bundle from a file: a streamed parse, a streamed hash, batched COPY.

The same verdicts and the same stored rows as :func:`runs.actions.bundles.do_import_bundle`
(tests/api/test_import_stream.py compares them), in bounded memory: the file is read by
:class:`runs.protocol.stream.BundleReader` in batches of a few thousand events, each batch is
validated, folded into the run's state and written (COPY on PostgreSQL), then dropped. The hash
is only known at the end of the file, so everything happens in ONE transaction: a bundle that
fails any check (its JSON, schema, integrity, structure, signature) rolls back and nothing of
it is stored.

What differs from the in-memory path, on purpose:

* the run id is claimed when the ``run`` member is read (``RUN_ID_COLLISION`` comes before the
  integrity verdict of a bundle that is both colliding and corrupted);
* a top-level member given twice is refused (``INVALID_RUN_BUNDLE``) instead of the last one winning;
* a bundle this path cannot stream -- a protocol version that needs migration, or a ``trace`` that
  comes before the ``run`` it belongs to -- raises :class:`NotStreamable`; the caller imports it
  with the in-memory path instead (whole-document peak memory).
"""

from __future__ import annotations

import hashlib
import tempfile
import threading
from array import array
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from django.db import connection, transaction

from runs.actions import responsecache, rollup_metrics, rollups
from runs.actions.bundles import import_verdict
from runs.actions.core import (
    ActionError,
    Appender,
    artifact_row,
    copy_event_rows,
    event_copy_sql,
    insert_events,
    new_run_row,
    save_new_run,
    set_projection,
    uses_copy,
)
from runs.actions.notify import RunChange, notify_on_commit
from runs.engine.fold import fold
from runs.engine.state import initial_run_doc
from runs.models import ArtifactVersion, RuleSetVersion, Run, RunSnapshot, Workspace
from runs.protocol.errors import ErrorCode, ProtocolError
from runs.protocol.migrations import CURRENT_PROTOCOL_VERSION
from runs.protocol.stream import BundleReader, TraceBatch
from runs.protocol.validate import (
    TraceFacts,
    check_bundle_invariants,
    validate_artifact_version,
    validate_bundle_schema,
    validate_event,
    validate_run,
    validate_trace_events,
)
from runs.protocol.values import dumps, new_id

Progress = Callable[[int, int], None]  # (events stored so far, bytes read so far)
_RB = ErrorCode.INVALID_RUN_BUNDLE


class NotStreamable(Exception):
    """The bundle needs the in-memory path (an older protocol version, the trace before the run)."""


class _CopyInFlight:
    """A batch's event rows written by COPY in a thread of its own, on the import's connection and
    in its transaction, while the import reads and checks the next batch. PostgreSQL answers a
    COPY once it has stored and indexed its rows (~55 us of its CPU an event, most of it the
    indexes); the import used to wait for that before reading on. The thread touches no Django
    connection, and nothing else uses the connection until :meth:`join` (psycopg's connection lock
    would hold it back if it did)."""

    def __init__(self, rows: list[tuple]) -> None:
        connection.ensure_connection()
        self.cursor = connection.connection.cursor()
        self.error: BaseException | None = None
        self.thread = threading.Thread(
            target=self._write, args=(event_copy_sql(), rows), name="import-copy", daemon=True
        )
        self.thread.start()

    def _write(self, sql: str, rows: list[tuple]) -> None:
        try:
            copy_event_rows(self.cursor, sql, rows)
        except BaseException as exc:  # noqa: BLE001 (raised again by settle(), in the import's thread)
            self.error = exc

    def join(self) -> BaseException | None:
        self.thread.join()
        self.cursor.close()
        return self.error


class _StreamAppender(Appender):
    """An Appender that writes and forgets each batch (the in-memory one keeps every event until save).

    A batch's rows go in ONE write (:meth:`flush_batch`): a batch is bounded by the reader's chunk
    (~4 MB of text, ~5,000 events), and cut at 5,000 rows its remainder went as a multi-row INSERT,
    whose parameters psycopg spells client-side at ~10x the CPU per row of COPY's. On PostgreSQL
    the COPY runs while the next batch is read (:class:`_CopyInFlight`); what reads the stored
    events back (the response cache's search for the requests) waits for it in :meth:`settle`."""

    flush_rows = 1 << 62
    _in_flight: tuple[_CopyInFlight, Callable[[], None]] | None = None

    def flush_batch(self) -> None:
        self.settle()
        rows, self.event_rows = self.event_rows, []
        snapshots, self.snapshot_rows = self.snapshot_rows, []
        responses, self.model_responses = self.model_responses, []
        gates, self.gate_events = self.gate_events, []
        events, first = self.events, self.first_seq

        def after_rows() -> None:
            if snapshots:
                RunSnapshot.objects.bulk_create(snapshots)
            if responses:
                responsecache.fill_from_responses(self.run, responses, recent=events, recent_first=first)
                rollups.count_model_calls(self.run, (event for _, event in responses))
            if responses or gates:
                rollup_metrics.count_metrics(self.run, (event for _, event in responses), gates)

        if uses_copy(rows):
            self._in_flight = (_CopyInFlight(rows), after_rows)
        else:
            insert_events(rows)
            after_rows()
        self.events = []
        self.first_seq = self.seq + 1
        self.run.last_seq = self.seq

    def settle(self) -> None:
        """Wait for the batch in flight (raising what its COPY raised) and do what waited for it."""
        if self._in_flight is None:
            return
        copy, after_rows = self._in_flight
        self._in_flight = None
        error = copy.join()
        if error is not None:
            raise error
        after_rows()

    def abandon(self) -> None:
        """Wait for the batch in flight and forget it: the import failed and rolls back."""
        if self._in_flight is not None:
            self._in_flight[0].join()
            self._in_flight = None


class _SparseTrace(list):  # type: ignore[type-arg]
    """The trace as the signature check reads it: its length and its gate events by index
    (the only events an approval names), without holding the others."""

    def __init__(self, length: int, events: dict[int, dict]) -> None:
        super().__init__()
        self._length = length
        self._events = events

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: Any) -> Any:
        if not isinstance(index, int) or not 0 <= index < self._length:
            raise IndexError(index)
        return self._events.get(index, {})


# What the signature check reads of a ``human_gate_resolved`` event (runs.protocol.signing:
# approvals_of, _check_approvals): the rest of it (a note, edits) is not kept until the end.
_GATE_FIELDS = ("id", "type", "stepId", "gate", "decision", "ts")


class _ArtifactVersions:
    """The (artifactKey, version) pairs of the artifacts member, for its duplicate check, in
    8 bytes each: a 64-bit BLAKE2b digest of the pair, kept in 256 arrays by its first byte.

    :meth:`repeated` sorts one array at a time (a transient list of 1/256th of them) and
    answers the digests met more than once: only those pairs are then compared exactly (the
    caller's second pass over the artifacts), so a digest collision never refuses a bundle.
    A set of the pairs themselves cost ~170 bytes per artifact version.
    """

    def __init__(self) -> None:
        self.buckets = [array("Q") for _ in range(256)]

    @staticmethod
    def digest(key: str, version: int) -> int:
        text = b"%d:" % version + key.encode("utf-8", "surrogatepass")
        return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")

    def add(self, key: str, version: int) -> None:
        value = self.digest(key, version)
        self.buckets[value >> 56].append(value)

    def repeated(self) -> set[int]:
        out: set[int] = set()
        for bucket in self.buckets:
            ordered = sorted(bucket)
            out.update(a for a, b in zip(ordered, ordered[1:], strict=False) if a == b)
        return out


class _ClippedQueryLog(deque):  # type: ignore[type-arg]
    """Django's debug query log (``connection.queries_log``, DEBUG on: up to 9,000 statements
    with their parameters spelt in) keeping each statement's first characters only. A bulk
    statement of an import spells a batch of the bundle (a few MB): kept whole, the log grew
    by ~0.8 KB per imported event."""

    LIMIT = 1000

    def append(self, entry: Any) -> None:
        sql = entry.get("sql") if isinstance(entry, dict) else None
        if isinstance(sql, str) and len(sql) > self.LIMIT:
            entry = {**entry, "sql": f"{sql[: self.LIMIT]}... ({len(sql)} characters)"}
        super().append(entry)


@contextmanager
def _clipped_query_log() -> Iterator[None]:
    """While importing, the connection's debug query log clips what it keeps (see above); the
    connection's own log object is back afterwards, with the clipped entries."""
    log = connection.queries_log
    connection.queries_log = _ClippedQueryLog(log, maxlen=log.maxlen)
    try:
        yield
    finally:
        clipped, connection.queries_log = connection.queries_log, log
        log.clear()
        log.extend(clipped)


def _refuse(exc: ProtocolError) -> ActionError:
    return ActionError(exc.code, exc.message, getattr(exc, "path", "") or "")


class _StreamImport:
    def __init__(self, workspace: Workspace, actor: str, as_new_id: bool, progress: Progress | None) -> None:
        self.workspace = workspace
        self.actor = actor
        self.new_id = new_id("run") if as_new_id else None
        self.progress = progress
        self.members: dict[str, Any] = {}
        self.appender: _StreamAppender | None = None
        self.step_ids: set[str] = set()
        self.gates: dict[int, dict] = {}
        self.length = 0
        self.structural: ProtocolError | None = None  # the first event of another run / unknown step
        # the artifacts member, read in batches: kept on disk (one JSON line each) until the run
        # row exists and the checks passed; (key, version) pairs seen, digested, for the duplicate check
        self.artifacts = tempfile.TemporaryFile(prefix="workbench-artifacts-")  # noqa: SIM115 (closed by close())
        self.artifact_count = 0
        self.artifact_versions = _ArtifactVersions()

    def close(self) -> None:
        self.artifacts.close()

    def abandon(self) -> None:
        """Before the transaction ends: no COPY of this import still runs on its connection."""
        if self.appender is not None:
            self.appender.abandon()

    def artifact_batch(self, batch: TraceBatch) -> None:
        for i, artifact in enumerate(batch.events, batch.first):
            try:
                validate_artifact_version(artifact, f"artifacts[{i}]", _RB)
            except ProtocolError as exc:
                raise _refuse(exc) from None
            self.artifact_versions.add(artifact["artifactKey"], int(artifact["version"]))
            self.artifacts.write(orjson.dumps(artifact) + b"\n")
        self.artifact_count += len(batch.events)

    def duplicate_artifact(self) -> ProtocolError | None:
        """The first artifact version given twice (as check_bundle_invariants names it), or None.
        Only pairs whose digests repeat are compared, in a second pass over the kept artifacts."""
        repeated = self.artifact_versions.repeated()
        if not repeated:
            return None
        seen: set[tuple[str, int]] = set()
        digest = _ArtifactVersions.digest
        for i, artifact in enumerate(self.stored_artifacts()):
            key = (artifact["artifactKey"], int(artifact["version"]))
            if digest(*key) not in repeated:
                continue
            if key in seen:
                return ProtocolError(
                    _RB, f"duplicate artifact version {key[0]!r} v{key[1]}", f"artifacts[{i}]"
                )
            seen.add(key)
        return None

    def stored_artifacts(self) -> Iterator[dict]:
        if "artifacts" in self.members and self.artifact_count == 0:
            yield from self.members["artifacts"]  # given whole (an empty array, or not an array)
            return
        self.artifacts.seek(0)
        for line in self.artifacts:
            yield orjson.loads(line)

    def member(self, key: str, value: Any) -> None:
        self.members[key] = value
        if key == "protocolVersion" and value != CURRENT_PROTOCOL_VERSION:
            raise NotStreamable(f"protocolVersion {value!r} needs migration")
        if key == "run":
            self._start(value)

    def _start(self, run_doc: Any) -> None:
        try:
            validate_run(run_doc, "run", _RB, structural=False)
        except ProtocolError as exc:
            raise _refuse(exc) from None
        if self.new_id is not None:
            run_doc = {**run_doc, "id": self.new_id}
        state = fold(initial_run_doc(run_doc), [])
        run = new_run_row(workspace=self.workspace, state=state, actor=self.actor, has_engine=True)
        save_new_run(run)
        self.appender = _StreamAppender(run, state, self.actor, derive_versions=False)
        self.step_ids = {step["id"] for step in run_doc["workflowSnapshot"]["steps"]}

    def batch(self, batch: TraceBatch, offset: int) -> None:
        if self.appender is None:
            raise NotStreamable("the trace comes before the run")
        events = batch.events
        try:
            facts = validate_trace_events(events, _RB)
        except ProtocolError:
            for i, event in enumerate(events):
                try:
                    validate_event(event, f"trace[{batch.first + i}]", _RB)
                except ProtocolError as exc:
                    raise _refuse(exc) from None
            raise
        run_id = self.members["run"]["id"]
        if self.structural is None and not facts.all_fine(run_id, self.step_ids):
            self._structural(events, batch.first, run_id)
        for i in facts.gate_resolved:
            event = events[i]
            self.gates[batch.first + i] = {k: event[k] for k in _GATE_FIELDS if k in event}
        appender = self.appender
        if self.new_id is not None:
            events = [{**event, "runId": self.new_id} for event in events]
        for event in events:
            appender.append(event)
        appender.flush_batch()
        self.length = batch.first + len(events)
        if self.progress is not None:
            self.progress(self.length, offset)

    def _structural(self, events: list[dict], first: int, run_id: str) -> None:
        """Remember the first event of another run or of an unknown step (refused after the
        integrity check, as check_bundle orders its verdicts)."""
        for i, event in enumerate(events):
            path = f"trace[{first + i}]"
            if event["runId"] != run_id:
                message = (
                    f"trace event {event['id']!r} belongs to run {event['runId']!r}, expected {run_id!r}"
                )
                self.structural = ProtocolError(_RB, message, f"{path}.runId")
                return
            step_id = event.get("stepId")
            if step_id and step_id not in self.step_ids:
                message = f"trace event {event['id']!r} references unknown workflow step {step_id!r}"
                self.structural = ProtocolError(_RB, message, f"{path}.stepId")
                return

    def finish(self, reader: BundleReader) -> Run:
        members = self.members
        if "protocolVersion" not in members:
            raise ActionError(
                ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
                "run bundle is missing `protocolVersion` and cannot be migrated",
                "protocolVersion",
            )
        skeleton = {**members, "trace": []} if "trace" in reader.keys else dict(members)
        try:
            validate_bundle_schema(skeleton)
        except ProtocolError as exc:
            raise _refuse(exc) from None
        integrity = members.get("integrity")
        declared = integrity.get("sha256") if isinstance(integrity, dict) else None
        if not isinstance(declared, str):
            raise ActionError(ErrorCode.MISSING_INTEGRITY, "run bundle has no integrity.sha256", "integrity")
        actual = reader.digest.hexdigest()
        if actual != declared:
            raise ActionError(
                ErrorCode.INTEGRITY_MISMATCH,
                f"declared sha256 {declared} but the content hashes to {actual}",
                "integrity.sha256",
            )
        try:
            check_bundle_invariants(skeleton, facts=TraceFacts(0, set(), set()))
        except ProtocolError as exc:
            raise _refuse(exc) from None
        if self.structural is not None:
            raise _refuse(self.structural)
        duplicate = self.duplicate_artifact()
        if duplicate is not None:
            raise _refuse(duplicate)
        signed = {**members, "trace": _SparseTrace(self.length, self.gates)}
        attestation = import_verdict(signed, sorted(self.gates))
        return self._store(attestation)

    def _store(self, attestation: dict | None) -> Run:
        appender = self.appender
        assert appender is not None
        appender.settle()
        appender.save()
        run, state = appender.run, appender.state
        run_doc = self.members["run"]
        if self.new_id is not None:
            run_doc = {**run_doc, "id": self.new_id}
        state.run = run_doc  # the bundle's run document is authoritative (it is what the hash covers)
        run.import_doc = dumps(run_doc)
        run.import_seq = self.length
        run.has_engine = "engine" in self.members  # known only at the end of the file
        run.import_attestation = None if attestation is None else dumps(attestation)
        set_projection(run, state)
        engine = self.members.get("engine")
        run.imported_engine = (
            dumps(engine) if engine is not None and engine != state.to_engine_snapshot() else None
        )
        run.save()
        _store_artifacts(run, self.stored_artifacts())
        RuleSetVersion.objects.bulk_create(
            RuleSetVersion(run=run, rule_set_id=rs["id"], version=0, seq=None, body=dumps(rs))
            for rs in self.members["ruleSets"]
        )
        notify_on_commit(RunChange.of(run, 1 if self.length else 0, run.last_seq))
        return run


# ArtifactVersion columns written by COPY, in this order (the model's, but its id).
_ARTIFACT_FIELDS = ("run", "key", "version", "type_id", "seq", "body")


def _store_artifacts(run: Run, artifacts: Iterator[dict]) -> None:
    """The artifacts member's versions: by COPY on PostgreSQL, each value through its field's own
    conversion as bulk_create's (which took ~64 us of client CPU per row, COPY ~15, measured on
    bench/gen_bundle.py's artifacts); elsewhere bulk_create in batches of 5,000. The same rows as
    :func:`artifact_row` makes."""
    if connection.vendor != "postgresql":
        rows: list[ArtifactVersion] = []
        for artifact in artifacts:
            rows.append(artifact_row(run, artifact, None))
            if len(rows) >= 5000:
                ArtifactVersion.objects.bulk_create(rows)
                rows = []
        ArtifactVersion.objects.bulk_create(rows)
        return
    meta = ArtifactVersion._meta
    fields = {field.name: field for field in meta.concrete_fields}
    run_field, key, version, type_id, _seq, body = (fields[name] for name in _ARTIFACT_FIELDS)
    qn = connection.ops.quote_name
    columns = ", ".join(qn(str(fields[name].column)) for name in _ARTIFACT_FIELDS)
    run_pk = run_field.get_db_prep_save(run.pk, connection)
    with connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY {qn(meta.db_table)} ({columns}) FROM STDIN") as copy:
            for artifact in artifacts:
                copy.write_row(
                    (
                        run_pk,
                        key.get_db_prep_save(artifact["artifactKey"], connection),
                        version.get_db_prep_save(artifact["version"], connection),
                        type_id.get_db_prep_save(artifact["typeId"], connection),
                        None,
                        body.get_db_prep_save(dumps(artifact), connection),
                    )
                )


def do_import_bundle_file(
    *,
    workspace: Workspace,
    path: str | Path,
    actor: str = "",
    as_new_id: bool = False,
    progress: Progress | None = None,
) -> Run:
    """Verify and store the bundle in the file at ``path`` in bounded memory, in one transaction.

    Raises :class:`ActionError` with the code the in-memory import gives (nothing stored), or
    :class:`NotStreamable` for a bundle only the in-memory path imports (nothing stored).
    """
    with open(path, "rb") as file:
        reader = BundleReader(file)
        importer = _StreamImport(workspace, actor, as_new_id, progress)
        try:
            with transaction.atomic(), _clipped_query_log():
                try:
                    try:
                        for key, value in reader.items():
                            if key == "trace":
                                if value is not None:
                                    importer.batch(value, reader.offset)
                            elif key == "artifacts" and isinstance(value, TraceBatch):
                                importer.artifact_batch(value)
                            elif key == "artifacts" and value is None:
                                importer.members["artifacts"] = []  # streamed: kept on disk, checked
                            else:
                                importer.member(key, value)
                    except ProtocolError as exc:
                        raise _refuse(exc) from None
                    if importer.appender is None:
                        importer.finish(reader)  # raises: a bundle without a run fails its schema
                        raise ActionError(_RB, "run bundle has no run", "run")
                    return importer.finish(reader)
                finally:
                    importer.abandon()  # a failed import's COPY in flight, joined before the rollback
        finally:
            reader.digest.close()
            importer.close()
