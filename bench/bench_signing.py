"""Signing benchmark (issue 25): what a signature costs beyond the integrity hash.

    .venv/bin/python bench/bench_signing.py [--events 100000] [--repeat 5]

Builds a bench/gen_bundle.py bundle (100,000 events by default) in memory, turns every
1,000th annotation into a ``human_gate_resolved`` event (so there are approvals to sign and
cross-check) and re-hashes it. Then, best of ``--repeat``:

* hash: ``compute_integrity`` (the integrity hash an export computes anyway);
* sign: ``sign_bundle_attestation`` with the gate indices the server knows (Event.seq) and
  without them (a walk of the trace), plus ``attach`` (target < 5 ms beyond the hash);
* check: ``check_bundle`` of the bundle's canonical bytes (what workbench-verify runs);
* verify: ``verify_attestations`` after the check, with the check's gate indices, as
  workbench-verify calls it (target < 1 ms beyond the check), and standalone (it re-hashes).

Figures only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from gen_bundle import build_bundle  # noqa: E402

from runs.protocol.bundle import check_bundle  # noqa: E402
from runs.protocol.canonical import canonical_bytes  # noqa: E402
from runs.protocol.integrity import compute_integrity, seal_bundle  # noqa: E402
from runs.protocol.signing import (  # noqa: E402
    attach,
    build_jwks,
    private_key_from_seed,
    sign_bundle_attestation,
    verify_attestations,
)


def _best(fn, repeat: int) -> tuple[float, object]:
    times = []
    result = None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return min(times), result


def _with_gates(bundle: dict) -> dict:
    annotations = [i for i, e in enumerate(bundle["trace"]) if e["type"] == "annotation"]
    for n, i in enumerate(annotations[::1000]):
        old = bundle["trace"][i]
        bundle["trace"][i] = {
            "id": old["id"],
            "runId": old["runId"],
            "ts": old["ts"],
            "stepId": "review",
            "type": "human_gate_resolved",
            "gate": "PAUSE_BEFORE",
            "decision": ("approved", "edited", "rejected")[n % 3],
        }
    return seal_bundle(bundle)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    bundle = _with_gates(build_bundle(args.events))
    key = private_key_from_seed(bytes(32))
    jwks = build_jwks([key])
    gates = [i for i, e in enumerate(bundle["trace"]) if e["type"] == "human_gate_resolved"]
    actors = {bundle["trace"][i]["id"]: "user:alice" for i in gates}
    common = dict(
        private_key=key,
        instance="https://bench.example",
        workspace="bench",
        exported_by="token:bench",
        at="2026-03-01T12:00:00Z",
        redaction=None,
        actors=actors,
    )
    n = args.repeat

    hash_s, _ = _best(lambda: compute_integrity(bundle), n)
    sign_s, envelope = _best(
        lambda: attach(bundle, sign_bundle_attestation(bundle, gate_indices=gates, **common)), n
    )
    walk_s, _ = _best(lambda: sign_bundle_attestation(bundle, **common), n)
    signed = attach(bundle, sign_bundle_attestation(bundle, gate_indices=gates, **common))
    text = canonical_bytes(signed)
    check_s, result = _best(lambda: check_bundle(text), max(1, n // 2))
    assert result.ok, result.message  # the benchmark's own input, not a measured property
    verify_s, verdict = _best(
        lambda: verify_attestations(
            result.bundle, jwks, integrity_checked=True, gate_indices=result.gate_resolved
        ),
        n * 20,
    )
    walk_verify_s, _ = _best(lambda: verify_attestations(result.bundle, jwks, integrity_checked=True), n)
    alone_s, _ = _best(lambda: verify_attestations(signed, jwks), max(1, n // 2))
    per_sig = statistics.median(
        _best(lambda: verify_attestations(signed, jwks, integrity_checked=True, gate_indices=gates), 1)[0]
        for _ in range(50)
    )

    print(
        f"bundle            {args.events} events, {len(text) / 1e6:.1f} MB canonical, {len(gates)} approvals"
    )
    print(f"integrity hash    {hash_s * 1e3:8.2f} ms  (compute_integrity, what every export pays)")
    print(f"sign + attach     {sign_s * 1e3:8.2f} ms  beyond the hash, gate indices given (target < 5 ms)")
    print(f"sign, trace walk  {walk_s * 1e3:8.2f} ms  beyond the hash, gate indices found by a walk")
    print(f"bundle check      {check_s * 1e3:8.2f} ms  (check_bundle of the bytes, as workbench-verify)")
    print(
        f"verify            {verify_s * 1e3:8.3f} ms  beyond the check, with its gate indices (target < 1 ms)"
    )
    print(f"verify, median    {per_sig * 1e3:8.3f} ms  of 50 single runs")
    print(f"verify, walk      {walk_verify_s * 1e3:8.2f} ms  beyond the check, gate indices found by a walk")
    print(f"verify standalone {alone_s * 1e3:8.2f} ms  (re-hashes: for callers that did not check)")
    print(f"verdict           {verdict.status} by {verdict.kid}, {len(verdict.approvals)} approvals")
    print(f"bundle-check cost {(verify_s / check_s) * 100:8.3f} %  of the check (issue: <= 5 %)")


if __name__ == "__main__":
    main()
