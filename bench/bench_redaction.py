"""Redaction benchmark (issue 23): what a redacted export costs beyond the full one.

    .venv/bin/python bench/bench_redaction.py [--events 100000] [--repeat 3]

Builds a bench/gen_bundle.py bundle (100,000 events by default) in memory. Then, best of
``--repeat``: ``redact_bundle`` by each policy (copy, redact, note, integrity hash) next to
``compute_integrity`` of the full bundle (what every export pays anyway), and the per-event cost
of the views a transcript or OTLP export of a redacted run reads through (``redacted_view``).

Figures only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from gen_bundle import build_bundle  # noqa: E402

from runs.protocol.integrity import compute_integrity  # noqa: E402
from runs.protocol.redaction import POLICIES, redact_bundle, redacted_view, redaction_of  # noqa: E402


def _best(fn, repeat: int) -> tuple[float, object]:
    times = []
    result = None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    bundle = build_bundle(args.events)
    n = args.repeat
    hash_s, _ = _best(lambda: compute_integrity(bundle), n)
    print(f"bundle            {args.events} events")
    print(f"integrity hash    {hash_s * 1e3:8.1f} ms  (compute_integrity: what every export pays)")
    for policy in POLICIES:
        took, redacted = _best(lambda policy=policy: redact_bundle(bundle, policy), n)
        removed = len(redaction_of(redacted)["redacted"])
        print(f"redact {policy:<5}      {took * 1e3:8.1f} ms  ({removed} values removed or masked, hashed)")
    took, _ = _best(lambda: sum(1 for _ in redacted_view(bundle["run"], bundle["trace"], "mask")[1]), n)
    print(
        f"view mask         {took * 1e3:8.1f} ms  "
        f"({took / args.events * 1e6:.1f} us per event: transcript / OTLP of a redacted run)"
    )


if __name__ == "__main__":
    main()
