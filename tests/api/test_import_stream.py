"""The streamed import (runs.actions.bigimport) stores what the in-memory import stores and refuses
what it refuses, with the same code: every conformance bundle, and generated bundles cut into many
batches. Nothing is stored when it refuses."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from runs import actions
from runs.actions.bigimport import NotStreamable, do_import_bundle_file
from runs.actions.workspaces import get_or_create_workspace
from runs.models import ArtifactVersion, CachedResponse, Event, RuleSetVersion, Run, RunSnapshot
from runs.protocol import stream
from tests.conftest import CONFORMANCE

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = CONFORMANCE / "manifest.json"
FILES = (
    sorted(e["file"] for e in json.loads(MANIFEST.read_text())["files"] if (CONFORMANCE / e["file"]).exists())
    if MANIFEST.exists()
    else []
)
RUN_FIELDS = (
    "run_id", "workflow_id", "workflow_version", "status", "title", "started_at", "ended_at", "tags",
    "subject", "doc", "state", "revision", "pending_gates", "rejected_gates", "event_count",
    "model_calls", "total_tokens", "cost_totals", "has_engine", "import_doc", "import_seq",
    "import_attestation", "imported_engine", "last_seq",
)  # fmt: skip


def stored(run: Run) -> dict:
    """Everything an import writes for a run, without row ids and write times."""
    return {
        "run": {name: getattr(run, name) for name in RUN_FIELDS},
        "events": list(
            Event.objects.filter(run=run)
            .order_by("seq")
            .values_list(
                "seq", "event_id", "type", "ts", "step_id", "correlation_id", "body", "actor", "span_ref"
            )
        ),
        "artifacts": sorted(
            ArtifactVersion.objects.filter(run=run).values_list("key", "version", "seq", "body")
        ),
        "rule_sets": sorted(
            RuleSetVersion.objects.filter(run=run).values_list("rule_set_id", "version", "body")
        ),
        "snapshots": list(RunSnapshot.objects.filter(run=run).order_by("seq").values_list("seq", "state")),
        "cache": sorted(CachedResponse.objects.filter(run=run).values_list("key", "model", "provider")),
    }


def both(tmp_path: Path, data: bytes, **kwargs) -> tuple[object, object]:
    """(in-memory outcome, streamed outcome): a stored() dict or the refusal's code."""
    path = tmp_path / "bundle.json"
    path.write_bytes(data)
    outcomes = []
    for name, importer in (("mem", actions.do_import_bundle), ("stream", do_import_bundle_file)):
        ws = get_or_create_workspace(f"imp-{name}-{len(outcomes)}")
        before = (Run.unscoped.count(), Event.objects.count())
        try:
            if importer is do_import_bundle_file:
                run = importer(workspace=ws, path=path, actor="t", **kwargs)
            else:
                run = importer(workspace=ws, data=data, actor="t", **kwargs)
        except actions.ActionError as exc:
            assert (Run.unscoped.count(), Event.objects.count()) == before  # nothing stored
            outcomes.append(exc.code)
            continue
        except NotStreamable:
            outcomes.append("not streamable")
            continue
        outcomes.append(stored(run))
    return outcomes[0], outcomes[1]


@pytest.mark.django_db
@pytest.mark.skipif(not FILES, reason="conformance corpus not found")
@pytest.mark.parametrize("name", FILES)
def test_conformance_bundle_imports_identically(tmp_path: Path, name: str) -> None:
    mem, streamed = both(tmp_path, (CONFORMANCE / name).read_bytes())
    if streamed == "not streamable":  # an older protocol version: the job uses the in-memory path
        return
    assert streamed == mem


def _generated(events: int) -> bytes:
    sys.path.insert(0, str(ROOT / "bench"))
    import orjson
    from gen_bundle import build_bundle

    from runs.protocol.canonical import _prepare

    return orjson.dumps(_prepare(build_bundle(events, seed=3)), option=orjson.OPT_INDENT_2)


@pytest.mark.django_db
@pytest.mark.parametrize("chunk", [700, 5000, 1 << 20])
def test_generated_bundle_in_many_batches_stores_the_same_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    monkeypatch.setattr(stream, "CHUNK_BYTES", chunk)
    monkeypatch.setattr(stream.BundleReader.__init__, "__defaults__", (chunk,))
    mem, streamed = both(tmp_path, _generated(1200))
    assert isinstance(mem, dict)
    assert streamed == mem
    assert len(mem["events"]) == 1200 and mem["snapshots"] and mem["cache"]


@pytest.mark.django_db
def test_compact_bundle_and_new_id(tmp_path: Path) -> None:
    import orjson

    data = orjson.dumps(orjson.loads(_generated(300)))
    mem, streamed = both(tmp_path, data, as_new_id=True)
    assert isinstance(mem, dict) and isinstance(streamed, dict)
    assert streamed["run"]["run_id"] != mem["run"]["run_id"]
    for part in (mem, streamed):
        part["run"] = {
            k: v for k, v in part["run"].items() if k not in ("run_id", "doc", "import_doc", "state")
        }
        part["events"] = [row[:6] + row[7:] for row in part["events"]]  # bodies name the run id
    assert streamed["events"] == mem["events"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "code"),
    [
        (lambda t: t[: len(t) // 2], "INVALID_JSON"),
        (lambda t: t.replace(b'"evt_0000150"', b'"evt_X"', 1), "INTEGRITY_MISMATCH"),
        (lambda t: t.replace(b'"type": "step_started"', b'"type": "nope"', 1), "INVALID_RUN_BUNDLE"),
        (lambda t: t + b"{}", "INVALID_JSON"),
        (lambda t: b"[]", "UNSUPPORTED_PROTOCOL_VERSION"),
        (lambda t: b"", "INVALID_JSON"),
        (lambda t: b"7", "INVALID_RUN_BUNDLE"),
    ],
)
def test_bad_input_is_refused_with_the_same_code_and_nothing_stored(
    tmp_path: Path, change, code: str
) -> None:
    mem, streamed = both(tmp_path, change(_generated(300)))
    assert mem == code
    assert streamed == code


CACHE_FIELDS = (
    "key", "key_v1", "provider", "model", "source_run_id", "request_seq", "response_seq",
    "request", "response", "response_digest", "hits", "last_hit_at",
)  # fmt: skip


@pytest.mark.django_db
def test_cache_rows_by_copy_equal_bulk_create(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A large batch of cached answers goes through COPY on PostgreSQL (responsecache._copy_rows):
    the same rows as the ORM's bulk_create, and an answer already kept is skipped, not doubled."""
    from runs.actions import responsecache

    path = tmp_path / "bundle.json"
    path.write_bytes(_generated(1500))  # 100 distinct answers, in one batch
    rows = {}
    for name, threshold in (("orm", 10**9), ("copy", 0)):
        monkeypatch.setattr(responsecache, "_COPY_MIN_ROWS", threshold)
        ws = get_or_create_workspace(f"cache-{name}")
        run = do_import_bundle_file(workspace=ws, path=path, actor="t")
        rows[name] = sorted(CachedResponse.objects.filter(run=run).values_list(*CACHE_FIELDS))
        again = do_import_bundle_file(workspace=ws, path=path, actor="t", as_new_id=True)
        assert not CachedResponse.objects.filter(run=again).exists()  # every answer was kept already
        assert CachedResponse.objects.filter(workspace=ws).count() == len(rows[name])
    assert len(rows["copy"]) >= 50
    assert rows["copy"] == rows["orm"]


def _postgresql() -> bool:
    from django.db import connection

    return connection.vendor == "postgresql"


@pytest.mark.django_db
def test_event_batches_are_copied_while_the_next_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL each batch's events go by COPY in a thread of their own, and the import reads
    the next batch meanwhile: the stored rows are those of the in-memory import, and each COPY,
    held open here once its rows are written, sees the import read on (or reach the file's end)."""
    import threading

    from runs.actions import bigimport

    if not _postgresql():
        pytest.skip("COPY is PostgreSQL's")
    monkeypatch.setattr(stream, "CHUNK_BYTES", 1 << 20)
    monkeypatch.setattr(stream.BundleReader.__init__, "__defaults__", (1 << 20,))
    progress = threading.Condition()
    read = [0]  # how many trace events the import has read (the file's end: all of them)
    overlapped = []  # per COPY: whether the import read past its rows before the COPY was let finish
    copy_threads = set()
    real_batch, real_finish, real_copy = (
        bigimport._StreamImport.batch,
        bigimport._StreamImport.finish,
        bigimport.copy_event_rows,
    )

    def moved_to(count: int) -> None:
        with progress:
            read[0] = max(read[0], count)
            progress.notify_all()

    def counting_batch(self, batch, offset):
        moved_to(batch.first + len(batch.events))
        return real_batch(self, batch, offset)

    def counting_finish(self, reader):
        moved_to(1 << 62)
        return real_finish(self, reader)

    def slow_copy(cursor, sql, rows):
        copy_threads.add(threading.current_thread().name)
        real_copy(cursor, sql, rows)
        last_seq = rows[-1][1]  # a COPY in the import's own thread would wait here in vain
        with progress:
            overlapped.append(progress.wait_for(lambda: read[0] > last_seq, timeout=2))

    monkeypatch.setattr(bigimport._StreamImport, "batch", counting_batch)
    monkeypatch.setattr(bigimport._StreamImport, "finish", counting_finish)
    monkeypatch.setattr(bigimport, "copy_event_rows", slow_copy)
    mem, streamed = both(tmp_path, _generated(6000))
    assert isinstance(mem, dict) and streamed == mem
    assert copy_threads == {"import-copy"}
    assert len(overlapped) >= 3 and all(overlapped)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("failure", ["copy", "integrity"])
def test_a_failed_import_with_a_copy_in_flight_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    """A COPY that fails in its thread, or a bundle refused (its hash) while the last batch's COPY
    is still out: the error reaches the caller, nothing is stored, no COPY thread is left, and the
    connection serves the next query."""
    import threading

    from runs.actions import bigimport

    if not _postgresql():
        pytest.skip("COPY is PostgreSQL's")
    monkeypatch.setattr(stream, "CHUNK_BYTES", 1 << 20)
    monkeypatch.setattr(stream.BundleReader.__init__, "__defaults__", (1 << 20,))
    data = _generated(3000)
    if failure == "copy":

        def failing_copy(cursor, sql, rows):
            raise RuntimeError("the COPY failed")

        monkeypatch.setattr(bigimport, "copy_event_rows", failing_copy)
    else:
        data = data.replace(b'"evt_0002990"', b'"evt_X"', 1)
    path = tmp_path / "bundle.json"
    path.write_bytes(data)
    ws = get_or_create_workspace("copy-fails")
    before = (Run.unscoped.count(), Event.objects.count(), CachedResponse.objects.count())
    if failure == "copy":
        with pytest.raises(RuntimeError, match="the COPY failed"):
            do_import_bundle_file(workspace=ws, path=path, actor="t")
    else:
        with pytest.raises(actions.ActionError) as refused:
            do_import_bundle_file(workspace=ws, path=path, actor="t")
        assert refused.value.code == "INTEGRITY_MISMATCH"
    assert not [t for t in threading.enumerate() if t.name == "import-copy"]
    assert (Run.unscoped.count(), Event.objects.count(), CachedResponse.objects.count()) == before
