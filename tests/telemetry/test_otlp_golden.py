"""OTLP ingest keeps its record exact while it gets faster (issue 31): the same protobuf bodies
give, byte for byte, the stored events (bodies and columns), the runs' projections, the trace
rows, the cost rollups and the live transcript lines they gave before the speed work.

The golden (``otlp_golden.json`` beside this file) holds one SHA-256 per section, computed by
this test's own normalisation: run ids become ``RUN<n>`` (numbered in trace id order) and
timestamps of the ingest's own clock become ``NOW`` (the spans' times, in 2020, stay). Refresh
it only for a change of the record that is meant (``WORKBENCH_WRITE_GOLDEN=1``), and say so.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import pytest
from django.test import Client

from accounts.tokens import create_token
from runs.models import CostRollup, Event, OtelTrace, Run
from runs.telemetry.transcript_log import transcript_path

pytestmark = pytest.mark.django_db(transaction=True)

GOLDEN = Path(__file__).with_name("otlp_golden.json")
T0 = 1_577_836_800_000_000_000  # 2020-01-01: every "now" of the ingest is later
_TOKEN = re.compile(r"token:[0-9a-f]+")  # the actor names the request's token
_NOW = re.compile(r"20(?:2[1-9]|[3-9]\d)-\d\d-\d\d[T ][0-9:.]+(?:Z|[+-]\d\d:\d\d)?")


def _bodies() -> list[bytes]:
    """Two requests' worth of shapes: a long trace split over three bodies (created, then
    appended to twice, its root last), and 60 small traces over two bodies (one straddles them),
    with chat spans (priced), tool spans, span events, an error status and odd attribute types."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event as SpanEvent
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    resource = Resource.create({"service.name": "golden-app", "deployment.environment": "test"})

    def ctx(trace: int, span: int) -> SpanContext:
        return SpanContext(trace, span, is_remote=False, trace_flags=TraceFlags(1))

    def make(trace: int, span: int, parent: int | None, i: int) -> ReadableSpan:
        start = T0 + i * 1_000_000
        kind, name, attrs, events = (
            SpanKind.INTERNAL,
            f"step {i % 7}",
            {"app.item": i, "app.ratio": i / 8},
            (),
        )
        if parent is None:
            name, attrs = "agent run", {"app.job": "golden", "session.id": f"s{trace % 3}"}
        elif i % 10 == 1:
            kind, name = SpanKind.CLIENT, "chat gpt-4o-mini"
            attrs = {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.usage.input_tokens": 100 + i % 50,
                "gen_ai.usage.output_tokens": 20,
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": f"q{i}"}]}]
                ),
            }
        elif i % 10 == 2:
            name = "execute_tool search"
            attrs = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search",
                "gen_ai.tool.call.arguments": json.dumps({"q": f"query {i}"}),
                "gen_ai.tool.call.result": json.dumps({"hits": i % 7}),
            }
        elif i % 10 == 3:
            attrs = {"app.tags": ("a", "b"), "app.flag": True, "app.big": 2**60}
            events = (SpanEvent("exception", {"exception.message": f"boom {i}"}, timestamp=start + 10),)
        status = Status(StatusCode.ERROR, "failed") if i % 10 == 4 else Status(StatusCode.OK)
        return ReadableSpan(
            name=name, context=ctx(trace, span), parent=ctx(trace, parent) if parent else None,
            resource=resource, attributes=attrs, events=events, kind=kind, status=status,
            start_time=start, end_time=start + 500_000,
        )  # fmt: skip

    long_trace, root = 0xABC << 64, 0x1000
    spans = [make(long_trace, root + i, root, i) for i in range(1, 1200)] + [make(long_trace, root, None, 0)]
    bodies = [encode_spans(spans[i : i + 512]).SerializeToString() for i in range(0, len(spans), 512)]
    small = []
    for t in range(1, 61):
        trace, top = (t << 80) + 7, t << 20
        small += [make(trace, top + i, top, t * 10 + i) for i in range(1, 10)] + [
            make(trace, top, None, t * 10)
        ]
    bodies += [encode_spans(small[:305]).SerializeToString(), encode_spans(small[305:]).SerializeToString()]
    return bodies


def _sha(value) -> str:
    if os.environ.get("WORKBENCH_GOLDEN_DUMP"):
        with open(os.environ["WORKBENCH_GOLDEN_DUMP"], "a") as fh:
            fh.write(json.dumps(value, sort_keys=True, ensure_ascii=True, default=str, indent=0) + "\n")
    return hashlib.sha256(
        json.dumps(value, sort_keys=True, ensure_ascii=True, default=str).encode()
    ).hexdigest()


def _record(workspace) -> dict[str, str]:
    traces = list(OtelTrace.objects.filter(workspace=workspace).select_related("run").order_by("trace_id"))
    names = {row.run.run_id: f"RUN{n}" for n, row in enumerate(traces)}

    def norm(text: str) -> str:
        for run_id, name in names.items():
            text = text.replace(run_id, name)
        return _TOKEN.sub("token:TOKEN", _NOW.sub("NOW", text))

    out: dict[str, str] = {}
    for row in traces:
        run = Run.unscoped.get(pk=row.run.pk)
        name = names[run.run_id]
        rows = Event.objects.filter(run=run).order_by("seq")
        out[f"{name} events"] = _sha(
            [
                [
                    e.seq,
                    e.event_id,
                    e.type,
                    e.ts,
                    e.step_id,
                    e.correlation_id,
                    e.span_ref,
                    norm(e.actor),
                    norm(e.body),
                ]
                for e in rows
            ]
        )
        out[f"{name} run"] = _sha(
            [
                run.status, run.title, run.tags, run.subject, run.revision, run.event_count, run.model_calls,
                run.total_tokens, run.cost_totals, run.pending_gates, run.last_seq, norm(run.doc), norm(run.state),
            ]
        )  # fmt: skip
        out[f"{name} trace"] = _sha(
            [row.trace_id, row.title, row.session_id, row.root_status, row.root_ended]
        )
        out[f"{name} transcript"] = _sha(norm(transcript_path(run).read_text()))
    sums: dict[str, list] = {}
    for r in CostRollup.objects.filter(workspace=workspace).values():
        labels = json.dumps([r["call_day"], r["workflow_id"], r["provider"], r["model"], r["step_id"],
                             r["currency"], r["pricing"], r["pricing_label"]])  # fmt: skip
        held = sums.setdefault(labels, [0] * 8)
        values = [r["calls"], r["input_tokens"], r["output_tokens"], r["total_tokens"], r["cached_input_tokens"],
                  r["reasoning_tokens"], float(r["duration_ms"]), float(r["cost"])]  # fmt: skip
        sums[labels] = [a + b for a, b in zip(held, values, strict=True)]
    out["rollups"] = _sha(sorted(sums.items()))
    return out


def test_the_record_of_the_same_bodies_is_unchanged(workspace, settings):
    # the transcripts as the live path writes them (a trace's is otherwise written by its first read)
    settings.WORKBENCH_TRANSCRIPTS_OF_TRACES = "live"
    secret = create_token(workspace=workspace, name="golden", scopes=["read", "write"]).secret
    client = Client()
    for body in _bodies():
        answer = client.post(
            "/v1/traces", body, content_type="application/x-protobuf", secure=True,
            HTTP_AUTHORIZATION=f"Bearer {secret}",
        )  # fmt: skip
        assert answer.status_code == 200 and answer.content == b"", answer.content
    assert Event.objects.filter(run__workspace=workspace, type="span_started").count() == 1800
    got = _record(workspace)
    if os.environ.get("WORKBENCH_WRITE_GOLDEN"):
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(GOLDEN.read_text())
    assert sorted(got) == sorted(want)
    assert [k for k in sorted(got) if got[k] != want[k]] == []
