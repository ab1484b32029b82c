"""The streamed import (runs.actions.bigimport) holds nothing per event or per artifact beyond a
few bytes: memory stays flat however long the trace (issue 29: 10,000,000 events under 2 GB).

Traced allocations (tracemalloc) are sampled after every batch of a bundle cut into small batches;
the slope of the traced memory against the items read so far must stay under a few bytes per
item, in the trace and in the artifacts member alike. A set of the artifact versions (~170 bytes
each) or anything kept per event (an id, a correlation, the event itself) fails it; so does a
debug query log that keeps whole statements (DEBUG on, checked separately)."""

from __future__ import annotations

import gc
import sys
import tracemalloc
from pathlib import Path

import orjson
import pytest
from django.db import connection

from runs import actions
from runs.actions import bigimport
from runs.actions.bigimport import do_import_bundle_file
from runs.actions.workspaces import get_or_create_workspace
from runs.models import ArtifactVersion
from runs.protocol import stream
from runs.protocol.integrity import seal_bundle

ROOT = Path(__file__).resolve().parents[2]


def _bundle(events: int) -> dict:
    sys.path.insert(0, str(ROOT / "bench"))
    from gen_bundle import build_bundle

    return build_bundle(events, seed=5)


def _text(bundle: dict) -> bytes:
    from runs.protocol.canonical import _prepare

    return orjson.dumps(_prepare(bundle), option=orjson.OPT_INDENT_2)


def _slope(samples: list[tuple[int, int]]) -> float:
    """Least-squares slope of (items read, traced bytes), the first fifth left out (warm-up)."""
    points = samples[len(samples) // 5 :]
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((x - mean_x) ** 2 for x, _ in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / var


def _small_batches(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(stream, "CHUNK_BYTES", chunk)
    monkeypatch.setattr(stream.BundleReader.__init__, "__defaults__", (chunk,))


def _sealed(bundle: dict) -> bytes:
    return _text(seal_bundle({k: v for k, v in bundle.items() if k != "integrity"}))


@pytest.mark.django_db
def test_memory_stays_flat_per_event_and_per_artifact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = _bundle(4000)
    artifacts = bundle["artifacts"] * 5  # 2,000 versions: the duplicate check's memory shows
    bundle["artifacts"] = [{**artifact, "version": i + 1} for i, artifact in enumerate(artifacts)]
    path = tmp_path / "bundle.json"
    path.write_bytes(_sealed(bundle))
    warm_up = tmp_path / "warm.json"
    warm_up.write_bytes(_text(_bundle(2400)))
    _small_batches(monkeypatch, 32 << 10)

    samples: dict[str, list[tuple[int, int]]] = {"trace": [], "artifacts": []}
    read = {"trace": 0, "artifacts": 0}
    calls = {"trace": 0, "artifacts": 0}

    def sampled(name: str, method):
        def wrapper(self, batch, *args):
            method(self, batch, *args)
            read[name] += len(batch.events)
            calls[name] += 1
            if calls[name] % 3 == 0:  # cyclic garbage waits for a full collection: not retention
                gc.collect()
                samples[name].append((read[name], tracemalloc.get_traced_memory()[0]))

        return wrapper

    tracemalloc.start(1)
    try:
        # a first import fills what CPython and the database driver keep for reuse (free lists,
        # caches of statements and attribute names, sqlite3's list of cursors, pruned every 200):
        # bounded, but it would show as growth here. 600 events were too few on Python 3.13
        # (~12 bytes an event of such growth); 2,400 fill them (slope ~1)
        do_import_bundle_file(workspace=get_or_create_workspace("warm"), path=warm_up, actor="t")
        monkeypatch.setattr(bigimport._StreamImport, "batch", sampled("trace", bigimport._StreamImport.batch))
        monkeypatch.setattr(
            bigimport._StreamImport,
            "artifact_batch",
            sampled("artifacts", bigimport._StreamImport.artifact_batch),
        )
        gc.freeze()  # what exists now is not scanned again: a collection per sample stays cheap
        run = do_import_bundle_file(workspace=get_or_create_workspace("mem"), path=path, actor="t")
    finally:
        gc.unfreeze()
        tracemalloc.stop()
    assert run.last_seq == 4000 and ArtifactVersion.objects.filter(run=run).count() == 2000
    assert read == {"trace": 4000, "artifacts": 2000}
    assert len(samples["trace"]) > 20 and len(samples["artifacts"]) > 8
    assert _slope(samples["trace"]) < 4, samples["trace"][::10]
    assert _slope(samples["artifacts"]) < 16, samples["artifacts"][::10]  # 8-byte digests


@pytest.mark.django_db
def test_debug_query_log_keeps_statements_clipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings
) -> None:
    """DEBUG on, Django logs every statement with its parameters spelt in (9,000 of them): during
    an import only their first characters, else the log grew by ~0.8 KB per imported event."""
    settings.DEBUG = True
    path = tmp_path / "bundle.json"
    path.write_bytes(_text(_bundle(1500)))
    log = connection.queries_log
    log.clear()
    do_import_bundle_file(workspace=get_or_create_workspace("dbg"), path=path, actor="t")
    assert connection.queries_log is log  # the connection's own log is back
    assert len(log) > 5
    longest = max(len(entry["sql"]) for entry in log)
    assert longest <= bigimport._ClippedQueryLog.LIMIT + 40
    assert any("characters)" in entry["sql"] for entry in log)  # some statement was long
    log.clear()
    actions.do_import_bundle(workspace=get_or_create_workspace("dbg2"), data=path.read_bytes(), actor="t")
    assert max(len(entry["sql"]) for entry in log) > 10 * bigimport._ClippedQueryLog.LIMIT  # unclipped


def _duplicated(events: int) -> bytes:
    """A sealed bundle whose artifacts member gives one version twice (the second at index 7)."""
    bundle = _bundle(events)
    artifacts = bundle["artifacts"]
    artifacts.insert(7, {**artifacts[2], "data": {"other": True}})
    return _sealed(bundle)


def _refusal(call) -> tuple[str, str, str]:
    with pytest.raises(actions.ActionError) as caught:
        call()
    return caught.value.code, caught.value.message, caught.value.path


@pytest.mark.django_db
@pytest.mark.parametrize("collide", [False, True])
def test_duplicate_artifact_version_same_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, collide: bool
) -> None:
    """The digested duplicate check names the same artifact as the in-memory check; digests that
    collide (every pair the same digest here) never refuse distinct versions."""
    if collide:
        monkeypatch.setattr(bigimport._ArtifactVersions, "digest", staticmethod(lambda key, version: 42))
    _small_batches(monkeypatch, 8 << 10)
    data = _duplicated(200)
    path = tmp_path / "bundle.json"
    path.write_bytes(data)
    mem = _refusal(lambda: actions.do_import_bundle(workspace=get_or_create_workspace("m"), data=data))
    streamed = _refusal(lambda: do_import_bundle_file(workspace=get_or_create_workspace("s"), path=path))
    assert streamed == ("INVALID_RUN_BUNDLE", "duplicate artifact version 'ingest-out' v3", "artifacts[7]")
    assert mem[0] == streamed[0] and mem[1].endswith(f"at {streamed[2]}: {streamed[1]}")  # its wording
    path.write_bytes(_text(_bundle(200)))  # no duplicate: imported, whatever the digests
    run = do_import_bundle_file(workspace=get_or_create_workspace("ok"), path=path)
    assert ArtifactVersion.objects.filter(run=run).count() == 20


@pytest.mark.django_db
def test_signed_bundle_with_gates_same_verdicts(tmp_path: Path, api, workspace, workflow) -> None:
    """The signature check reads the gate events kept from the trace (only the fields an approval
    names): a signed bundle stores the same rows and verdict, a forged one is refused alike."""
    import base64
    import copy
    import json

    from runs.models import Run
    from runs.protocol.canonical import canonical_bytes
    from tests.api.test_import_stream import both
    from tests.api.test_signed_exports import _gated_run

    run_id = _gated_run(workspace, workflow)
    bundle = json.loads(api.get(f"/api/runs/{run_id}/bundle").content)
    Run.objects.filter(run_id=run_id).delete()
    assert any(e["type"] == "human_gate_resolved" for e in bundle["trace"])
    mem, streamed = both(tmp_path, canonical_bytes(bundle))
    assert isinstance(mem, dict) and streamed == mem
    assert json.loads(mem["run"]["import_attestation"])["approvals"]
    Run.unscoped.filter(run_id=run_id).delete()
    changed = copy.deepcopy(bundle)
    envelope = changed["integrity"]["attestations"][0]
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["approvals"][0]["decision"] = "rejected"
    envelope["payload"] = base64.b64encode(canonical_bytes(statement)).decode()
    assert both(tmp_path, canonical_bytes(changed)) == ("SIGNATURE_INVALID", "SIGNATURE_INVALID")


@pytest.mark.django_db
def test_artifact_rows_by_copy_equal_bulk_create(tmp_path: Path) -> None:
    """The artifacts member goes by COPY on PostgreSQL (bigimport._store_artifacts): the same rows
    as the in-memory import's bulk_create, a key with a NUL and one longer than its column too."""
    from tests.api.test_import_stream import both

    bundle = _bundle(300)
    artifacts = bundle["artifacts"]
    artifacts[0] = {**artifacts[0], "artifactKey": "nul\x00key", "typeId": "t\x00" + "y" * 250}
    artifacts[1] = {**artifacts[1], "artifactKey": "long-" + "k" * 400}
    mem, streamed = both(tmp_path, _sealed(bundle))
    assert isinstance(mem, dict) and len(mem["artifacts"]) == 30
    assert streamed == mem
