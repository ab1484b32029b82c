"""bench/gen_bundle.py's streamed writer (what bench/bench_import.py uses for 10,000,000 events, which
the in-memory writer cannot hold in RAM) writes the very bytes of the in-memory one: the same RNG
sequence, the same pretty-printed members in the same order, the same integrity hash, which the
streamed import's reader (runs.protocol.stream.BundleReader) finds valid."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from runs.protocol.integrity import compute_integrity
from runs.protocol.stream import BundleReader
from tests.bigbundle import load_gen_bundle

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    return load_gen_bundle("_bench_gen_bundle_stream")


def _in_memory(gen: ModuleType, events: int, **kwargs: object) -> bytes:
    return gen._pretty(gen.build_bundle(events, **kwargs)) + b"\n"


@pytest.mark.parametrize(
    ("events", "chunk", "adversarial"),
    [(0, 10, False), (5, 2, False), (2000, 10_000, False), (2003, 97, True), (20_000, 10_000, False)],
)
def test_streamed_writer_writes_the_in_memory_bytes(
    gen: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    events: int,
    chunk: int,
    adversarial: bool,
) -> None:
    monkeypatch.setattr(gen, "CHUNK", chunk)  # chunks that do not divide the trace, one, several
    path = tmp_path / "streamed.json"
    gen.write_streamed(path, events, seed=11, adversarial=adversarial)
    assert path.read_bytes() == _in_memory(gen, events, seed=11, adversarial=adversarial)
    assert not [p for p in tmp_path.iterdir() if p != path]  # the spools are gone


def test_streamed_bundle_hashes_as_the_streamed_import_reads_it(gen: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "streamed.json"
    gen.write_streamed(path, 3000, seed=2)
    with path.open("rb") as file:
        reader = BundleReader(file, chunk_bytes=64 << 10)
        members = {key: value for key, value in reader.items() if key != "trace"}
        actual = reader.digest.hexdigest()
    assert actual == members["integrity"]["sha256"]
    assert actual == compute_integrity(gen.build_bundle(3000, seed=2))
