"""Demo data: a nightly batch of 10k+ events, recorded by a host and brought in as a bundle.

The batch ran yesterday night, so its timestamps lie in the past: it arrives the way a run from
another Workbench (or the reference implementation) arrives, as a protocol 1.0.0 bundle with its
integrity hash and no signature (its run page says "unsigned"), through
``runs.actions.do_import_bundle`` (verified, then stored in one transaction with bulk inserts).
It shows the timeline's paging and search (summaries name the postings, a few calls fail with
searchable errors), the span waterfall (a root span per step, a child span per posting) and a
ledger spread over two days.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from runs.engine.commands import Context
from runs.engine.lifecycle import new_run
from runs.protocol.canonical import canonical_bytes
from runs.protocol.integrity import seal_bundle

BATCH_RUN_ID = "run_demo_nightly_batch"
BATCH_ITEMS = 2000  # 5 events per posting (6 when it fails): 10,000+ with the steps around them

BATCH_WORKFLOW = {
    "id": "posting-batch",
    "version": 1,
    "title": "Nightly batch: fetch, score and report postings",
    "steps": [
        {"id": "fetch", "title": "Fetch postings", "gatePolicy": "AUTO", "outputs": ["postings"]},
        {"id": "score", "title": "Score postings", "gatePolicy": "AUTO", "inputs": ["postings"]},
        {"id": "report", "title": "Write the report", "gatePolicy": "AUTO"},
    ],
    "edges": [
        {"id": "e1", "from": "fetch", "to": "score"},
        {"id": "e2", "from": "score", "to": "report"},
    ],
}

TITLES = (
    "Staff Backend Engineer",
    "ML Platform Engineer",
    "Python Developer",
    "Data Engineer",
    "Site Reliability Engineer",
    "Frontend Engineer (htmx)",
    "Engineering Manager",
)
COMPANIES = ("Northwind", "Contoso", "Fabrikam", "Globex", "Initech", "Umbrella", "Tailspin")


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


class _Trace:
    def __init__(self, run_id: str, start: datetime) -> None:
        self.run_id = run_id
        self.t = start
        self.events: list[dict[str, Any]] = []

    def add(self, type_: str, advance_ms: int = 0, **fields: Any) -> None:
        self.t += timedelta(milliseconds=advance_ms)
        event = {"id": f"evt_batch_{len(self.events) + 1:06d}", "runId": self.run_id, "ts": _iso(self.t)}
        event["type"] = type_
        event.update({k: v for k, v in fields.items() if v is not None})
        self.events.append(event)


def batch_bundle(*, items: int = BATCH_ITEMS, now: datetime | None = None) -> bytes:
    """The bundle (canonical bytes, integrity hash, unsigned) of the nightly batch run: it started at 23:20 UTC the
    day before ``now`` and ran past midnight."""
    now = now or datetime.now(UTC)
    start = datetime.combine(now.date() - timedelta(days=1), datetime.min.time(), tzinfo=UTC) + timedelta(
        hours=23, minutes=20
    )
    state = new_run(
        ctx=Context(now=lambda: _iso(start)),
        workflow=BATCH_WORKFLOW,
        run_id=BATCH_RUN_ID,
        subject={"tenantId": "tenant-globex", "planId": "enterprise"},
        metadata={"source": "demo_data", "batch": "nightly"},
        tags=["demo", "batch"],
    )
    trace = _Trace(BATCH_RUN_ID, start)
    trace.add("step_started", 40, stepId="fetch")
    trace.add("span_started", 1, spanId="sp-fetch", name="fetch postings", kind="client", stepId="fetch")
    trace.add(
        "tool_call",
        2300,
        stepId="fetch",
        name="fetch_postings",
        args={"since": "yesterday", "limit": items},
        result={"count": items},
    )
    trace.add("span_ended", 5, spanId="sp-fetch", status="ok", durationMs=2306)
    trace.add("step_completed", 3, stepId="fetch", ok=True)
    trace.add("step_started", 10, stepId="score")
    trace.add("span_started", 1, spanId="sp-score", name="score batch", kind="internal", stepId="score")
    score_start = trace.t
    for i in range(1, items + 1):
        title = TITLES[i % len(TITLES)]
        company = COMPANIES[(i * 3) % len(COMPANIES)]
        posting = f"posting #{i}: {title} at {company}"
        span = f"sp-item-{i}"
        corr = f"c-item-{i}"
        latency = 600 + (i * 37) % 1400
        inp, out = 900 + (i * 13) % 700, 120 + (i * 7) % 180
        cached = 600 if i % 3 else 0
        cost = round((inp - cached) * 0.000001 + cached * 0.0000001 + out * 0.000004, 8)
        provider, model = ("openai", "gpt-4.1-mini") if i % 5 == 0 else ("anthropic", "claude-haiku-4-5")
        trace.add(
            "span_started",
            2,
            spanId=span,
            parentSpanId="sp-score",
            name=f"score posting #{i}",
            kind="internal",
            stepId="score",
            attributes={"posting.id": f"p{i}", "posting.company": company},
        )
        trace.add(
            "tool_call",
            1,
            stepId="score",
            correlationId=corr,
            name="lookup_company",
            args={"company": company},
            result={"company": company, "remote": i % 2 == 0},
        )
        trace.add(
            "model_io",
            1,
            stepId="score",
            correlationId=corr,
            direction="request",
            provider=provider,
            model=model,
            summary=f"request: score {posting}",
            payload={
                "model": model,
                "system": "You score job postings for a candidate profile. Answer with JSON.",
                "messages": [{"role": "user", "content": f"Score {posting} for the profile of Ada."}],
                "max_tokens": 512,
                "temperature": 0.2,
            }
            if provider == "anthropic"
            else {
                "model": model,
                "messages": [
                    {"role": "system", "content": "You score job postings for a candidate profile."},
                    {"role": "user", "content": f"Score {posting} for the profile of Ada."},
                ],
                "max_completion_tokens": 512,
                "temperature": 0.2,
            },
        )
        failed = i % 250 == 0
        trace.add(
            "model_io",
            latency,
            stepId="score",
            correlationId=corr,
            direction="response",
            provider=provider,
            model=model,
            summary=(f"rate limited: {posting}" if failed else f"scored {posting}: {40 + (i * 11) % 60}"),
            usage=None if failed else {"inputTokens": inp, "outputTokens": out, "cachedInputTokens": cached},
            cost=None if failed else {"amount": cost, "currency": "USD"},
            durationMs=latency,
        )
        if failed:
            trace.add(
                "error",
                1,
                stepId="score",
                correlationId=corr,
                message=f"429 rate limited on {posting}",
                code="RATE_LIMITED",
            )
        trace.add("span_ended", 3, spanId=span, status="error" if failed else "ok", durationMs=latency + 4)
    trace.add(
        "span_ended",
        5,
        spanId="sp-score",
        status="ok",
        durationMs=int((trace.t - score_start).total_seconds() * 1000) + 5,
    )
    trace.add("step_completed", 2, stepId="score", ok=True)
    trace.add("step_started", 10, stepId="report")
    trace.add(
        "model_io",
        4200,
        stepId="report",
        correlationId="c-report",
        direction="response",
        provider="anthropic",
        model="claude-sonnet-4-5",
        summary=f"report: {items} postings scored, {items // 250} rate limited",
        usage={"inputTokens": 12000, "outputTokens": 1800},
        cost={"amount": 0.063, "currency": "USD"},
        durationMs=4200,
    )
    trace.add("step_completed", 20, stepId="report", ok=True)
    trace.add("run_status_changed", 5, status="completed")
    run_doc = dict(state.run)
    run_doc["status"] = "completed"
    run_doc["endedAt"] = trace.events[-1]["ts"]
    bundle = {
        "protocolVersion": "1.0.0",
        "run": run_doc,
        "trace": trace.events,
        "artifacts": [],
        "ruleSets": [],
    }
    return canonical_bytes(seal_bundle(bundle))
