"""The fold reproduces the reference's engine snapshots for its own exported traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runs.engine import AppendEvents, RunState, apply_event, decide, fold
from tests.conftest import CONFORMANCE
from tests.engine.conftest import make_ctx

VALID = sorted(p for p in (CONFORMANCE / "valid").glob("*.json") if not p.name.endswith(".canonical.json"))

pytestmark = pytest.mark.skipif(not VALID, reason="conformance corpus not available")

ENGINE_KEYS = ("revision", "stepStatus", "gateState", "idempotency")


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _runstore(path: Path) -> dict | None:
    expected = CONFORMANCE / "expected" / f"{path.stem}.runstore.json"
    return _load(expected)["body"] if expected.exists() else None


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_fold_matches_engine_snapshot(path: Path) -> None:
    bundle = _load(path)
    state = fold(bundle["run"], bundle["trace"])
    snapshot = state.to_engine_snapshot()
    if bundle.get("engine") is not None:
        assert snapshot == bundle["engine"]
    assert state.warnings == []


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_fold_matches_runstore_body(path: Path) -> None:
    body = _runstore(path)
    if body is None:
        pytest.skip("no runstore expectation")
    bundle = _load(path)
    state = fold(bundle["run"], bundle["trace"])
    snapshot = state.to_engine_snapshot()
    for key in ENGINE_KEYS:
        assert snapshot[key] == body[key], key
    assert state.run == body["run"]
    assert dict(state.artifacts) == {k: v for k, v in body["artifactsByKey"]}
    assert dict(state.rule_sets) == {k: v for k, v in body["ruleSetsById"]}


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_reference_traces_pass_the_strict_event_checks(path: Path) -> None:
    """Appending the reference's events one batch at a time onto the fresh run is accepted."""
    bundle = _load(path)
    run = {k: v for k, v in bundle["run"].items() if k != "endedAt"} | {"status": "running"}
    state = RunState.initial(run)
    events = decide(state, AppendEvents(bundle["trace"]), make_ctx())
    assert events == bundle["trace"]
    for event in events:
        apply_event(state, event)
    assert state.to_engine_snapshot() == fold(bundle["run"], bundle["trace"]).to_engine_snapshot()


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_incremental_fold_and_json_round_trip(path: Path) -> None:
    bundle = _load(path)
    trace = bundle["trace"]
    half = len(trace) // 2
    first = fold(bundle["run"], trace[:half])
    restored = RunState.from_json(json.loads(json.dumps(first.to_json())))
    assert restored == first
    resumed = fold(bundle["run"], trace[half:], start=restored)
    assert resumed == fold(bundle["run"], trace)
