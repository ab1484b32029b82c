"""Generate a valid, signed protocol 1.0.0 run bundle for the bundle-check benchmark.

    .venv/bin/python bench/gen_bundle.py [--events 100000] [--out /tmp/bench_bundle.json] [--seed 7]

Deterministic for a given seed. The trace mixes every common event type (model calls with
usage/cost/payload, tool calls, artifact writes and patches, gates, spans, annotations),
floats of all magnitudes and text in several scripts (including astral characters and
keys whose UTF-16 order differs from code-point order). Written pretty-printed like the
reference's exports (``JSON.stringify(bundle, null, 2)``), about 1 KB per event.
"""

from __future__ import annotations

import argparse
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runs.protocol.canonical import _prepare  # noqa: E402  (JS number text for the writer)
from runs.protocol.integrity import seal_bundle  # noqa: E402

STEPS = ["ingest", "plan", "draft", "review", "publish"]
WORDS = [
    "alpha", "pipeline", "résumé", "naïve", "Grüße", "東京", "данные", "مرحبا", "नमस्ते", "🚀",
    "emoji😀", "\ue000private", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "tab\tnewline\n", "quote\"back\\slash", "control\u0001",
    "model", "token", "latency", "score", "ok",
]  # fmt: skip
PROVIDERS = [("anthropic", "claude-sonnet-4"), ("openai", "gpt-5-mini"), ("local", "gemma-3-270m")]
# Numbers as the reference writes them: JavaScript prints 1.0 as 1, so such values come back as ints.
FLOATS = [0.1, 0.0012, 1e-7, 5e21, 1e21, 2.5, -0.5, 123456.789, 1e300, 5e-324, 0.30000000000000004]
# Doubles orjson prints differently from JavaScript, and keys whose UTF-16 order differs from
# code-point order: --adversarial puts them in every tool call, forcing the exact canonical pass.
ADVERSARIAL_FLOATS = [3e-6, 1e16, 1.0, -0.0, 2.0**53]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _ts(start: datetime, i: int) -> str:
    return (start + timedelta(milliseconds=i)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def build_bundle(events: int, seed: int = 7, adversarial: bool = False) -> dict[str, Any]:
    rng = random.Random(seed)
    run_id = "run_bench-0001"
    start = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    steps = [
        {"id": s, "title": s.title(), "gatePolicy": "AUTO", "inputs": [], "outputs": [f"{s}-out"]}
        for s in STEPS
    ]
    steps[3]["gatePolicy"] = "PAUSE_BEFORE"
    edges = [
        {"id": f"e{i}", "from": a, "to": b} for i, (a, b) in enumerate(zip(STEPS, STEPS[1:], strict=False))
    ]
    workflow = {"id": "wf-bench", "version": 2, "title": "Bench ✓", "steps": steps, "edges": edges}
    trace: list[dict[str, Any]] = []
    artifacts: list[dict[str, Any]] = []
    versions: dict[str, int] = {}
    open_spans: list[str] = []
    for i in range(events):
        step = STEPS[i % len(STEPS)]
        base = {"id": f"evt_{i:07d}", "runId": run_id, "ts": _ts(start, i)}
        kind = i % 10
        if kind == 0:
            event = {**base, "type": "step_started", "stepId": step}
        elif kind in (1, 2, 3):
            provider, model = PROVIDERS[i % len(PROVIDERS)]
            inp, out = rng.randrange(0, 20000), rng.randrange(0, 4000)
            event = {
                **base,
                "stepId": step,
                "correlationId": f"corr-{i // 3}",
                "type": "model_io",
                "direction": "response" if kind != 1 else "request",
                "provider": provider,
                "model": model,
                "usage": {"inputTokens": inp, "outputTokens": out, "totalTokens": inp + out},
                "cost": {"amount": round(rng.random() / 100, 6), "currency": rng.choice(["USD", "EUR"])},
                "durationMs": rng.random() * 5000,
                "summary": _text(rng, 8),
                "payload": {
                    "messages": [
                        {"role": "system", "content": _text(rng, 20)},
                        {"role": "user", "content": _text(rng, 45)},
                    ],
                    "temperature": rng.choice(FLOATS),
                    "scores": [rng.random(), rng.choice(FLOATS), rng.randrange(-(2**31), 2**31)],
                },
            }
        elif kind == 4:
            event = {
                **base,
                "stepId": step,
                "type": "tool_call",
                "name": rng.choice(["search", "fetch", "sql"]),
                "args": {"q": _text(rng, 12), "limit": rng.randrange(1, 100)},
                "result": {"rows": [[rng.random(), _text(rng, 3)] for _ in range(4)], "ok": True},
            }
        elif kind == 5:
            key = f"{step}-out"
            versions[key] = versions.get(key, 0) + 1
            artifact = {
                "artifactKey": key,
                "typeId": "json",
                "version": versions[key],
                "createdAt": base["ts"],
                "data": {"text": _text(rng, 30), "values": [rng.choice(FLOATS) for _ in range(5)]},
            }
            artifacts.append(artifact)
            event = {**base, "stepId": step, "type": "artifact_written", "artifact": artifact}
        elif kind == 6:
            span_id = f"span-{i}"
            event = {
                **base,
                "type": "span_started",
                "spanId": span_id,
                "name": f"work {step}",
                "kind": "internal",
                "attributes": {"i": i, "label": _text(rng, 3)},
            }
            if open_spans:
                event["parentSpanId"] = open_spans[-1]
            open_spans.append(span_id)
        elif kind == 7:
            event = {
                **base,
                "type": "span_ended",
                "spanId": open_spans.pop() if open_spans else f"span-x{i}",
                "status": "ok",
                "durationMs": rng.random() * 100,
            }
        elif kind == 8:
            event = {**base, "type": "annotation", "text": _text(rng, 20), "tags": ["bench", "ünïcode"]}
        else:
            event = {**base, "type": "step_completed", "stepId": step, "ok": True}
        if adversarial and kind == 4:
            event["args"].update({"\U0001f600k": rng.choice(ADVERSARIAL_FLOATS), "\ue000k": 2})
        trace.append(event)
    engine = {
        "revision": len(trace),
        "stepStatus": [[s, "completed"] for s in STEPS],
        "gateState": [[s, {"before": "approved", "after": "approved"}] for s in STEPS],
        "idempotency": [],
    }
    run = {
        "id": run_id,
        "workflowId": workflow["id"],
        "workflowVersion": workflow["version"],
        "workflowSnapshot": workflow,
        "startedAt": _ts(start, 0),
        "endedAt": _ts(start, events),
        "status": "completed",
        "metadata": {"bench": True, "big": 2**53 - 1, "ratio": 0.25},
        "tags": ["bench"],
    }
    bundle = {
        "protocolVersion": "1.0.0",
        "run": run,
        "trace": trace,
        "artifacts": artifacts,
        "ruleSets": [
            {
                "id": "rs-1",
                "ruleSchemaId": "bench",
                "rules": [{"id": "r1", "priority": 1, "enabled": True, "payload": {"x": 1.5}}],
            }
        ],
        "engine": engine,
    }
    return seal_bundle(bundle)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--adversarial", action="store_true", help="force the exact canonical pass")
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_bundle.json"))
    args = parser.parse_args()
    bundle = build_bundle(args.events, args.seed, args.adversarial)
    # JavaScript number text (as the reference writes), pretty-printed like JSON.stringify(b, null, 2)
    text = orjson.dumps(_prepare(bundle), option=orjson.OPT_INDENT_2) + b"\n"
    args.out.write_bytes(text)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB, {args.events} events)")


if __name__ == "__main__":
    main()
