"""Reads for comparing two runs of one workspace (the pure parts are in ``runs.presenters.compare``).

    shared = shared_history(run_a, run_b)             # seqs 1..N copied into a fork: identical
    page = aligned_page(run_a, run_b, after=Cursor(N, N))
    found = first_divergence(run_a, run_b, start=Cursor(N, N))
    summary = run_summary(run)                        # steps, gates, ledger by step, artifacts

Both runs must already have been fetched through the workspace (``runs.selectors.runs.get_run``).
Traces are read a keyset window at a time on the (run, seq) key, never whole: a page reads about
``limit + LOOKAHEAD`` events of each run, and the search for the first divergence reads at most
``SCAN_BUDGET`` events of each run per request (then it says where it stopped).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.core.cache import cache
from django.db.models import Q

from runs.models import ArtifactVersion, Event, Run, RunFork, RunParent
from runs.presenters.compare import (
    CHANGED,
    JSON_DIFF_LIMIT,
    ONLY_A,
    ONLY_B,
    SAME,
    CompareRow,
    align,
    compare_row,
    number,
    row_kind,
)
from runs.presenters.timeline import EventRecord, diff_values
from runs.protocol.telemetry import DEFAULT_DIRECTIONS, Totals, entry_delta, ledger_entry
from runs.protocol.values import loads
from runs.selectors.runs import artifact_versions_by_key, gate_history, run_state

COMPARE_PAGE = 100
COMPARE_MAX_PAGE = 500
SCAN_BUDGET = 20_000  # events of each run read per request while looking for the first divergence
SCAN_ROWS = 2_000  # rows aligned per window of that search
LOOKAHEAD = 200  # events read beyond a page on each side, so that alignment sees what comes next
GATE_LIMIT = 500
DIFFERENCES = frozenset({CHANGED, ONLY_A, ONLY_B})
CACHE_SECONDS = 600
SUMMARY_INLINE_EVENTS = 50_000  # events of both runs up to which the page adds up usage itself


class BadCursor(ValueError):
    code = "INVALID_INPUT"


@dataclass(frozen=True)
class Cursor:
    """A synchronised point of the two traces: the last seq taken from each run."""

    a: int = 0
    b: int = 0

    def __str__(self) -> str:
        return f"{self.a}.{self.b}"

    @classmethod
    def parse(cls, text: str) -> Cursor:
        try:
            left, right = text.split(".")
            a, b = int(left), int(right)
        except ValueError:
            raise BadCursor(f"pos must be two seqs, A.B (got {text[:40]!r})") from None
        if not (0 <= a < 2**31 and 0 <= b < 2**31):
            raise BadCursor("pos seqs must be between 0 and 2**31 - 1")
        return cls(a, b)


@dataclass
class SharedHistory:
    """Where the two traces start to be compared, when one run is a fork of the other.

    A fork with copied history (seed 002, :class:`RunFork`): seqs 1..``upto`` of both runs are the
    same events. A fork from state (``do_fork_from_state``, e.g. the demo's fork): the fork carried
    the source's artifacts and rules in as its own events before its ``run_forked`` marker; they
    are ``carried`` events of the fork, not the source's, and are never aligned with it. Either way
    ``start`` is the synchronised point the comparison starts from: the source's fork seq and the
    fork's event before its marker."""

    upto: int = 0
    fork_of: str = ""  # "b" when B is a fork of A, "a" the other way, "siblings" for two forks of one run
    fork: RunFork | None = None
    start: Cursor = Cursor()
    carried: int = 0  # events the fork carried in before its marker (a fork from state)
    from_seq: int = 0  # the source's fork point: its events after from_seq - 1 are compared

    @property
    def fork_run(self) -> str:
        return {"a": "A", "b": "B"}.get(self.fork_of, "")


def _marker_seq(child: Run, source: Run) -> int | None:
    """The seq of the ``run_forked`` event naming ``source`` in ``child`` (a fork from state)."""
    if not RunParent.objects.filter(child=child, parent_run_id=source.run_id).exists():
        return None
    for seq, body in (
        Event.objects.filter(run=child, type="run_forked").order_by("seq").values_list("seq", "body")[:20]
    ):
        if loads(body).get("parentRunId") == source.run_id:
            return seq
    return None


def _source_seq(child: Run, source: Run, marker: int) -> int:
    """The source's revision the fork was taken at: ``metadata.forkedFromSeq`` when the fork names
    it, else the source's last event recorded before the fork's marker."""
    metadata = child.run_doc.get("metadata")
    named = metadata.get("forkedFromSeq") if isinstance(metadata, dict) else None
    if type(named) is int and 0 <= named <= source.last_seq:
        return named
    when = Event.objects.filter(run=child, seq=marker).values_list("recorded_at", flat=True).first()
    if when is None:
        return source.last_seq
    last = (
        Event.objects.filter(run=source, recorded_at__lte=when)
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    )
    return last or 0


def _state_fork(child: Run, source: Run, side: str) -> SharedHistory | None:
    marker = _marker_seq(child, source)
    if marker is None:
        return None
    fork_seq = _source_seq(child, source, marker)
    start = Cursor(fork_seq, marker - 1) if side == "b" else Cursor(marker - 1, fork_seq)
    return SharedHistory(0, side, None, start, marker - 1, fork_seq + 1)


def shared_history(run_a: Run, run_b: Run) -> SharedHistory:
    """The copied prefix when one run is a fork of the other, or both forks of one source; the
    carried history of a fork from state."""
    forks = {f.run_id: f for f in RunFork.objects.filter(run__in=[run_a.pk, run_b.pk])}
    fa, fb = forks.get(run_a.pk), forks.get(run_b.pk)
    if fb is not None and fb.source_id == run_a.pk:
        upto = min(fb.history, run_a.last_seq)
        return SharedHistory(upto, "b", fb, Cursor(upto, upto), from_seq=fb.from_seq)
    if fa is not None and fa.source_id == run_b.pk:
        upto = min(fa.history, run_b.last_seq)
        return SharedHistory(upto, "a", fa, Cursor(upto, upto), from_seq=fa.from_seq)
    if fa is not None and fb is not None and fa.source_id is not None and fa.source_id == fb.source_id:
        upto = min(fa.history, fb.history)
        return SharedHistory(upto, "siblings", fb, Cursor(upto, upto))
    return _state_fork(run_b, run_a, "b") or _state_fork(run_a, run_b, "a") or SharedHistory()


def carried_events(run: Run, shared: SharedHistory, *, limit: int = 200) -> list[EventRecord]:
    """The first ``limit`` events the fork carried in before its marker (shown collapsed)."""
    if not shared.carried:
        return []
    events, _ = read_window(run, after=0, size=min(shared.carried, limit))
    return events


def read_window(run: Run, *, after: int, size: int) -> tuple[list[EventRecord], bool]:
    """The next ``size`` events after seq ``after``, and whether they reach the end of the trace."""
    cols = ("seq", "type", "ts", "step_id", "correlation_id", "actor", "body")
    raw = list(Event.objects.filter(run=run, seq__gt=after).order_by("seq").values_list(*cols)[: size + 1])
    at_end = len(raw) <= size
    return [
        EventRecord(seq, t, ts, step, corr, actor, loads(body))
        for seq, t, ts, step, corr, actor, body in raw[:size]
    ], at_end


def _advance(cursor: Cursor, pairs) -> Cursor:
    a, b = cursor.a, cursor.b
    for pa, pb in pairs:
        if pa is not None:
            a = pa.seq
        if pb is not None:
            b = pb.seq
    return Cursor(a, b)


def _window_pairs(run_a: Run, run_b: Run, after: Cursor, limit: int):
    wa, end_a = read_window(run_a, after=after.a, size=limit + LOOKAHEAD)
    wb, end_b = read_window(run_b, after=after.b, size=limit + LOOKAHEAD)
    pairs, used_a, used_b = align(wa, wb, limit=limit, end_a=end_a, end_b=end_b)
    done = end_a and end_b and used_a == len(wa) and used_b == len(wb)
    return pairs, done


@dataclass
class AlignedPage:
    rows: list[CompareRow]
    after: Cursor
    next_after: Cursor | None  # None: both traces end on this page


def aligned_page(run_a: Run, run_b: Run, *, after: Cursor, limit: int = COMPARE_PAGE) -> AlignedPage:
    """One page of aligned rows starting at the synchronised point ``after``."""
    limit = max(1, min(limit, COMPARE_MAX_PAGE))
    pairs, done = _window_pairs(run_a, run_b, after, limit)
    rows = [compare_row(pa, pb) for pa, pb in pairs]
    _diff_patched_versions(run_a, run_b, rows)
    return AlignedPage(
        rows=rows, after=after, next_after=None if done or not pairs else _advance(after, pairs)
    )


def _diff_patched_versions(run_a: Run, run_b: Run, rows: list[CompareRow]) -> None:
    """Changed ``artifact_patch`` rows: the versions the patches made, diffed path by path (the
    patches themselves say little side by side). One query per run for the whole page."""
    patched = [
        (r, r.a, r.b)
        for r in rows
        if r.kind == CHANGED and r.a and r.b and r.a.type == r.b.type == "artifact_patch"
    ]
    if not patched:
        return
    found: dict[tuple[str, str, Any], Any] = {}
    for run, side in ((run_a, "a"), (run_b, "b")):
        wanted = Q()
        for _, a, b in patched:
            patch = (a if side == "a" else b).body
            wanted |= Q(key=str(patch.get("artifactKey")), version=patch.get("toVersion"))
        for key, version, body in ArtifactVersion.objects.filter(wanted, run=run).values_list(
            "key", "version", "body"
        ):
            found[(side, key, version)] = loads(body).get("data")
    for r, a, b in patched:
        ka = ("a", str(a.body.get("artifactKey")), a.body.get("toVersion"))
        kb = ("b", str(b.body.get("artifactKey")), b.body.get("toVersion"))
        if ka in found and kb in found:
            r.json_diff = diff_values(found[ka], found[kb], limit=JSON_DIFF_LIMIT)
            r.json_diff_of = f"{ka[1]} v{ka[2]} → v{kb[2]}"


@dataclass
class Divergence:
    before: Cursor  # the page that starts with the divergent row
    seq_a: int | None
    seq_b: int | None
    kind: str
    summary_a: str
    summary_b: str


@dataclass
class DivergenceSearch:
    found: Divergence | None
    scanned_to: Cursor | None  # the search stopped here (budget spent) without finding one
    start: Cursor


def _trace_key(run: Run) -> str:
    # Events are only ever appended: a run's id, last seq and last update name its trace exactly.
    return f"{run.pk}:{run.last_seq}:{run.updated_at.timestamp() if run.updated_at else ''}"


def cached_first_divergence(run_a: Run, run_b: Run, *, start: Cursor) -> DivergenceSearch:
    """:func:`first_divergence`, remembered while neither trace changes (pages of one comparison
    search once)."""
    key = f"wb:compare:div:{_trace_key(run_a)}:{_trace_key(run_b)}:{start}:{SCAN_BUDGET}"
    found = cache.get(key)
    if found is None:
        found = first_divergence(run_a, run_b, start=start)
        cache.set(key, found, CACHE_SECONDS)
    return found


def first_divergence(run_a: Run, run_b: Run, *, start: Cursor, budget: int = SCAN_BUDGET) -> DivergenceSearch:
    """The first aligned row after ``start`` that differs (markers aside), reading at most about
    ``budget`` events of each run; ``scanned_to`` says where it stopped when it found none."""
    cursor = settled = start  # settled: after the last equal row (fork markers then show on the page)
    while True:
        pairs, done = _window_pairs(run_a, run_b, cursor, SCAN_ROWS)
        for pa, pb in pairs:
            kind = row_kind(pa, pb)
            if kind in DIFFERENCES:
                row = compare_row(pa, pb, details=False)
                return DivergenceSearch(
                    Divergence(
                        before=settled,
                        seq_a=pa.seq if pa else None,
                        seq_b=pb.seq if pb else None,
                        kind=row.kind,
                        summary_a=row.summary_a,
                        summary_b=row.summary_b,
                    ),
                    None,
                    start,
                )
            cursor = _advance(cursor, [(pa, pb)])
            if kind == SAME:
                settled = cursor
        if done or not pairs:
            return DivergenceSearch(None, None, start)
        if cursor.a - start.a >= budget or cursor.b - start.b >= budget:
            return DivergenceSearch(None, cursor, start)


# --- what each run did, step by step -----------------------------------------------------------


def _step_times(run: Run) -> dict[str, float]:
    """Seconds from a step's first start to its last completion (steps that completed)."""
    first: dict[str, datetime] = {}
    last: dict[str, datetime] = {}
    for etype, target in (("step_started", first), ("step_completed", last)):
        rows = Event.objects.filter(run=run, type=etype).order_by("seq").values_list("step_id", "ts")
        for step, ts in rows.iterator(chunk_size=2000):
            try:
                moment = datetime.fromisoformat(ts.replace("Z", "+00:00"))
            except ValueError:
                continue
            if etype == "step_started":
                target.setdefault(step, moment)
            else:
                target[step] = moment
    out: dict[str, float] = {}
    for step, begun in first.items():
        ended = last.get(step)
        if ended is not None and (ended.tzinfo is None) == (begun.tzinfo is None):
            out[step] = (ended - begun).total_seconds()
    return out


def model_usage(run: Run) -> dict[str, Any]:
    """The run's model responses added up as the telemetry ledger adds them (runs.protocol.telemetry):
    ``totals`` and ``by_step`` (ledger totals dicts) and ``exact_cost`` (currency -> decimal text).
    Only the rollup by step is kept (the full ledger also rolls up providers, models and subjects)."""
    key = f"wb:compare:usage:{_trace_key(run)}"
    found = cache.get(key)
    if found is not None:
        return found
    doc = run.run_doc
    totals, by_step = Totals(), dict[str, Totals]()
    exact: dict[str, Decimal] = {}
    # Bodies are compact JSON (runs.models.dumps): a response's holds this text, so the database
    # skips requests and stream chunks (a payload quoting it only costs a parse: checked below).
    rows = (
        Event.objects.filter(run=run, type="model_io", body__contains='"direction":"response"')
        .order_by("seq")
        .values_list("body", flat=True)
    )
    for body in rows.iterator(chunk_size=2000):
        event = loads(body)
        if event.get("direction") not in DEFAULT_DIRECTIONS:
            continue
        entry = ledger_entry(doc, event)
        delta = entry_delta(entry)
        totals.add(delta)
        if entry.get("stepId"):
            by_step.setdefault(entry["stepId"], Totals()).add(delta)
        amount = number(entry["cost"]["amount"]) if "cost" in entry else None
        if amount is not None:  # the ledger entry's amount is a JSON number (None otherwise)
            currency = entry["cost"]["currency"]
            exact[currency] = exact.get(currency, Decimal(0)) + amount
    found = {
        "totals": totals.as_dict(),
        "by_step": {step: t.as_dict() for step, t in by_step.items()},
        "exact_cost": {cur: format(v, "f") for cur, v in exact.items()},
    }
    cache.set(key, found, CACHE_SECONDS)
    return found


def summary_is_cheap(run_a: Run, run_b: Run) -> bool:
    """Whether the page can add up both runs' usage itself: small runs, or already added up."""
    if run_a.last_seq + run_b.last_seq <= SUMMARY_INLINE_EVENTS:
        return True
    return cache.get(f"wb:compare:usage:{_trace_key(run_a)}") is not None and (
        cache.get(f"wb:compare:usage:{_trace_key(run_b)}") is not None
    )


def run_summary(run: Run) -> dict[str, Any]:
    """Status, steps (status, gate decisions, time), the ledger by step and the latest artifacts."""
    state = run_state(run)
    usage = model_usage(run)
    gates: dict[str, list[str]] = {}
    for item in reversed(gate_history(run, limit=GATE_LIMIT)):
        if item["type"] != "human_gate_resolved":
            continue
        data = item["data"]
        label = str(data.get("gate", ""))
        if item["checkpoint"]:
            label += f" {item['checkpoint']}"
        gates.setdefault(item["step_id"], []).append(f"{label}: {data.get('decision')}")
    versions = artifact_versions_by_key(run)
    steps = [s.get("id") for s in (state.run.get("workflowSnapshot") or {}).get("steps") or []]
    wall = (run.ended_at - run.started_at).total_seconds() if run.ended_at else None
    return {
        "run": run,
        "last_seq": run.last_seq,
        "wall_seconds": wall,
        "steps": [s for s in steps if isinstance(s, str)],
        "step_status": dict(state.step_status),
        "gates": gates,
        "step_seconds": _step_times(run),
        **usage,
        "artifacts": dict(state.artifacts),
        "artifact_versions": {k: len(v) for k, v in versions.items()},
    }
