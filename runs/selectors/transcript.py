"""A stored run as its transcript (JSONL bytes), read in chunks through the workspace-scoped run.

The mapping of events to lines is pure and lives in ``runs.protocol.transcript``. A run that carries a
redaction policy (an imported redacted bundle, or a fork of one) is shown as that policy lets it out,
and ``redact`` asks for a policy for any run (``runs.protocol.redaction``).
"""

from __future__ import annotations

from collections.abc import Iterator

from asgiref.sync import sync_to_async

from runs.models import Event
from runs.protocol.redaction import event_redactor, policy_of, redact_run_doc
from runs.protocol.transcript import ChildRun, StoredEvent, dump_line, transcript_lines
from runs.protocol.values import loads
from runs.selectors.runs import children as child_runs


def iter_run_transcript(run, *, chunk: int = 2000, redact: str | None = None) -> Iterator[bytes]:
    """The stored run (fetched through a workspace-scoped selector) as JSONL bytes, redacted by
    ``redact`` or else by the policy the run carries."""

    def stored() -> Iterator[StoredEvent]:
        last = 0
        while True:
            rows = list(
                Event.objects.filter(run=run, seq__gt=last)
                .order_by("seq")
                .values_list("seq", "body", "actor")[:chunk]
            )
            for seq, body, actor in rows:
                yield StoredEvent(seq, loads(body), actor)
            if len(rows) < chunk:
                return
            last = rows[-1][0]

    kids = []
    for child in child_runs(run.workspace, run.run_id):
        doc = child.run_doc
        kids.append(
            ChildRun(
                run_id=child.run_id,
                workflow_id=child.workflow_id,
                started_at=doc.get("startedAt", ""),
                ended_at=doc.get("endedAt"),
                status=child.status,
                from_step_id=(doc.get("context") or {}).get("forkedFromStepId"),
            )
        )
    doc = run.run_doc
    events: Iterator[StoredEvent] = stored()
    policy = redact or policy_of(doc)
    if policy is not None:
        doc = redact_run_doc(doc, policy)
        redact_event = event_redactor(policy)
        events = (StoredEvent(e.seq, redact_event(e.body), e.actor) for e in events)
    for obj in transcript_lines(doc, events, kids):
        yield dump_line(obj)


async def aiter_run_transcript(run, *, lines_per_chunk: int = 500, redact: str | None = None):
    """The same bytes for an ASGI response: the database is read on the sync thread, a chunk of
    lines at a time, so a long run streams in bounded memory instead of being buffered."""
    lines = iter_run_transcript(run, redact=redact)

    def take() -> bytes:
        return b"".join(line for _, line in zip(range(lines_per_chunk), lines, strict=False))

    while True:
        chunk = await sync_to_async(take, thread_sensitive=True)()
        if not chunk:
            return
        yield chunk
