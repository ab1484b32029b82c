"""Generate a valid, signed protocol 1.0.0 run bundle for the bundle-check benchmark.

    .venv/bin/python bench/gen_bundle.py [--events 100000] [--out /tmp/bench_bundle.json] [--seed 7]

Deterministic for a given seed. The trace mixes every common event type (model calls with
usage/cost/payload, tool calls, artifact writes and patches, gates, spans, annotations),
floats of all magnitudes and text in several scripts (including astral characters and
keys whose UTF-16 order differs from code-point order). Written pretty-printed like the
reference's exports (``JSON.stringify(bundle, null, 2)``), about 0.9 KB per event.

Above 200,000 events (or with ``--stream``) the bundle is written streamed, never held: events are
generated and written 10,000 at a time, the ``artifacts`` member (it follows the trace) goes to a
temporary file meanwhile, and the integrity hash is computed from the canonical text of each chunk
(spooled: the hash puts the trace last). Same RNG sequence, same bytes as ``--in-memory``
(tests/api/test_import_stream_generator.py); ~70 MB of RAM at any size, where 10,000,000 events
built in memory would need over 20 GB. Temporary files need ~0.7 KB per event next to ``--out``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runs.protocol.canonical import _prepare, canonical_bytes  # noqa: E402  (_prepare: JS number text)
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
RUN_ID = "run_bench-0001"
START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
# The streamed writer: events held at a time, and the size above which it is the default.
CHUNK = 10_000
STREAM_ABOVE = 200_000
# Placeholders in the streamed writer's skeleton (the document with the arrays and hash left out).
TRACE_MARK, ARTIFACTS_MARK, DIGEST_MARK = "\x00trace\x00", "\x00artifacts\x00", "\x00sha256\x00"


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _ts(start: datetime, i: int) -> str:
    return (start + timedelta(milliseconds=i)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _workflow() -> dict[str, Any]:
    steps = [
        {"id": s, "title": s.title(), "gatePolicy": "AUTO", "inputs": [], "outputs": [f"{s}-out"]}
        for s in STEPS
    ]
    steps[3]["gatePolicy"] = "PAUSE_BEFORE"
    edges = [
        {"id": f"e{i}", "from": a, "to": b} for i, (a, b) in enumerate(zip(STEPS, STEPS[1:], strict=False))
    ]
    return {"id": "wf-bench", "version": 2, "title": "Bench ✓", "steps": steps, "edges": edges}


def _events(
    events: int, seed: int, adversarial: bool
) -> Iterator[tuple[dict[str, Any], dict[str, Any] | None]]:
    """The trace in order, each event with the artifact it writes (or ``None``): one RNG sequence
    for both writers."""
    rng = random.Random(seed)
    versions: dict[str, int] = {}
    open_spans: list[str] = []
    for i in range(events):
        step = STEPS[i % len(STEPS)]
        base = {"id": f"evt_{i:07d}", "runId": RUN_ID, "ts": _ts(START, i)}
        kind = i % 10
        artifact = None
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
        yield event, artifact


def _bundle(events: int, trace: Any, artifacts: Any) -> dict[str, Any]:
    """The bundle's members in the order the file has them (``trace`` and ``artifacts`` given)."""
    workflow = _workflow()
    engine = {
        "revision": events,
        "stepStatus": [[s, "completed"] for s in STEPS],
        "gateState": [[s, {"before": "approved", "after": "approved"}] for s in STEPS],
        "idempotency": [],
    }
    run = {
        "id": RUN_ID,
        "workflowId": workflow["id"],
        "workflowVersion": workflow["version"],
        "workflowSnapshot": workflow,
        "startedAt": _ts(START, 0),
        "endedAt": _ts(START, events),
        "status": "completed",
        "metadata": {"bench": True, "big": 2**53 - 1, "ratio": 0.25},
        "tags": ["bench"],
    }
    return {
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


def build_bundle(events: int, seed: int = 7, adversarial: bool = False) -> dict[str, Any]:
    trace: list[dict[str, Any]] = []
    artifacts: list[dict[str, Any]] = []
    for event, artifact in _events(events, seed, adversarial):
        trace.append(event)
        if artifact is not None:
            artifacts.append(artifact)
    return seal_bundle(_bundle(events, trace, artifacts))


def _pretty(value: Any) -> bytes:
    # JavaScript number text (as the reference writes), pretty-printed like JSON.stringify(b, null, 2)
    return orjson.dumps(_prepare(value), option=orjson.OPT_INDENT_2)


class _Array:
    """A top-level array member written piece by piece: its pretty text (elements at depth 2,
    as in the whole document) to ``text`` and its canonical text (comma-separated elements,
    no brackets) to ``canonical``."""

    def __init__(self, text: BinaryIO, canonical: BinaryIO) -> None:
        self.text, self.canonical = text, canonical
        self.count = 0

    def write(self, items: list[dict[str, Any]]) -> None:
        if not items:
            return
        # one element per line block at depth 0 ("[\n  {...},\n  {...}\n]"): strings hold no raw
        # newline, so indenting every line by two more spaces puts the elements at depth 2
        body = _pretty(items)[2:-2].replace(b"\n", b"\n  ")
        canonical = canonical_bytes(items)[1:-1]
        if self.count:
            self.text.write(b",\n")
            self.canonical.write(b",")
        else:
            self.text.write(b"[\n")
        self.text.write(b"  " + body)
        self.canonical.write(canonical)
        self.count += len(items)

    def close(self) -> None:
        self.text.write(b"\n  ]" if self.count else b"[]")


def _copy(source: BinaryIO, *targets: Any) -> None:
    source.seek(0)
    while block := source.read(1 << 22):
        for target in targets:
            target(block)


def write_streamed(path: Path, events: int, seed: int = 7, adversarial: bool = False) -> None:
    """Write the bundle :func:`build_bundle` makes, byte for byte as ``_pretty(build_bundle(...))
    + b"\\n"``, holding CHUNK events at a time: the trace goes to ``path`` as it is generated, the
    artifacts member to a temporary file (it follows the trace in the document), and the
    canonical texts of both arrays to temporary files, hashed once the trace ends (the hash
    covers ``{artifacts, engine, ruleSets, run, trace}`` in that order, the trace last)."""
    skeleton = _bundle(events, TRACE_MARK, ARTIFACTS_MARK)
    text = _pretty({**skeleton, "integrity": {"sha256": DIGEST_MARK}}) + b"\n"
    head, rest = text.split(orjson.dumps(TRACE_MARK))
    middle, rest = rest.split(orjson.dumps(ARTIFACTS_MARK))
    tail, end = rest.split(orjson.dumps(DIGEST_MARK))
    spools = [tempfile.TemporaryFile(dir=path.parent, prefix=".gen-") for _ in range(3)]
    artifacts_text, artifacts_canonical, trace_canonical = spools
    try:
        with path.open("wb") as out:
            out.write(head)
            trace = _Array(out, trace_canonical)
            artifacts = _Array(artifacts_text, artifacts_canonical)
            chunk: list[dict[str, Any]] = []
            written: list[dict[str, Any]] = []
            for event, artifact in _events(events, seed, adversarial):
                chunk.append(event)
                if artifact is not None:
                    written.append(artifact)
                if len(chunk) == CHUNK:
                    trace.write(chunk)
                    artifacts.write(written)
                    chunk, written = [], []
            trace.write(chunk)
            artifacts.write(written)
            trace.close()
            artifacts.close()
            out.write(middle)
            artifacts_text.flush()
            _copy(artifacts_text, out.write)
            out.write(tail)
            digest = hashlib.sha256(b'{"artifacts":[')
            _copy(artifacts_canonical, digest.update)
            for key in ("engine", "ruleSets", "run"):
                digest.update(b'],"%s":' % key.encode() if key == "engine" else b',"%s":' % key.encode())
                digest.update(canonical_bytes(skeleton[key]))
            digest.update(b',"trace":[')
            _copy(trace_canonical, digest.update)
            digest.update(b"]}")
            out.write(orjson.dumps(digest.hexdigest()) + end)
    finally:
        for spool in spools:
            spool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--adversarial", action="store_true", help="force the exact canonical pass")
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_bundle.json"))
    how = parser.add_mutually_exclusive_group()
    how.add_argument(
        "--stream", action="store_true", help=f"streamed writer (default above {STREAM_ABOVE:,} events)"
    )
    how.add_argument("--in-memory", action="store_true", help="build the whole bundle, then write it")
    args = parser.parse_args()
    stream = args.stream or (not args.in_memory and args.events > STREAM_ABOVE)
    # written next to the target, renamed once complete: an interrupted run leaves no bundle behind
    part = args.out.with_name(args.out.name + ".part")
    try:
        if stream:
            write_streamed(part, args.events, args.seed, args.adversarial)
        else:
            part.write_bytes(_pretty(build_bundle(args.events, args.seed, args.adversarial)) + b"\n")
        os.replace(part, args.out)
    finally:
        part.unlink(missing_ok=True)
    how_written = "streamed" if stream else "in memory"
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB, {args.events} events, {how_written})")


if __name__ == "__main__":
    main()
