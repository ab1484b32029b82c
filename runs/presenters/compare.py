"""Two runs side by side (pure: plain data in, plain data out).

    pairs, used_a, used_b = align(events_a, events_b, limit=100, end_a=True, end_b=True)
    rows = [compare_row(a, b) for a, b in pairs]
    ops = text_diff(before, after)           # word level, line level for long texts
    d = delta(Decimal("1.5"), Decimal("2"))  # d.text == "+0.5 (+33.3%)"

Alignment ("by step, then by position"), with :class:`difflib.SequenceMatcher` of the standard
library: first on the events themselves (as a replay compares them), so equal events line up and an
event one run has and the other has not shows on one side only; what differs in between is aligned
on the key (step id, type, model_io direction), so the same step's events line up, and inside a
matching stretch, or a replaced one for events of the same step and type, events pair by position
(events of different types are never one row: one is removed, the other added). Pairs are then ``same`` (equal ignoring ids, timestamps and clock durations, as a
replay compares them: :func:`runs.engine.divergence.same_event`), ``changed``, ``only_a``/``only_b``, or
``marker`` (what the fork machinery writes: ``run_forked``, divergence and audit notes).

The traces are aligned a window at a time, so a page never needs either whole trace: callers hand
in the next events of each run after a synchronised point, with lookahead, and get back at most
``limit`` rows plus how many events of each side they consumed. The cut is always at a row
boundary, so the next window starts at a synchronised point again.

Model outputs that differ are diffed as text (:func:`text_diff`, difflib on words, on lines for
long texts); artifact data as JSON, path by path (:func:`runs.presenters.timeline.diff_values`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import orjson

from runs.engine.divergence import comparable, is_marker, same_event
from runs.presenters import numbers
from runs.presenters.numbers import count
from runs.presenters.timeline import Change, EventRecord, diff_values, summarize
from runs.protocol.canonical import wire_bytes
from runs.protocol.transcript import output_text

TEXT_LIMIT = 20_000  # characters of each side a text diff looks at
WORD_DIFF_TOKENS = 2_000  # above this many words on a side, the diff is by line (<= ~50 ms a pair)
JSON_DIFF_LIMIT = 200

SAME, CHANGED, ONLY_A, ONLY_B, MARKER = "same", "changed", "only_a", "only_b", "marker"


def align_key(event: EventRecord) -> tuple[str, str, str]:
    direction = event.body.get("direction") if event.type == "model_io" else ""
    return (event.step_id, event.type, direction if isinstance(direction, str) else "")


Pair = tuple[EventRecord | None, EventRecord | None]


def _pairs_of(op: str, a: Sequence[EventRecord], b: Sequence[EventRecord]) -> list[Pair]:
    if op == "equal":
        return list(zip(a, b, strict=True))
    out: list[Pair] = []
    for k in range(max(len(a), len(b))):
        ea = a[k] if k < len(a) else None
        eb = b[k] if k < len(b) else None
        if ea is not None and eb is not None and align_key(ea) == align_key(eb):
            out.append((ea, eb))  # same step, same type: one row, diffed field by field
        else:
            if ea is not None:
                out.append((ea, None))
            if eb is not None:
                out.append((None, eb))
    return out


def fingerprint(event: EventRecord) -> bytes:
    """The event as a replay compares it (:func:`comparable`), as bytes: equal for equal events."""
    value = comparable(event.body)
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # nested deeper than orjson writes
        return wire_bytes(value)


def _by_structure(a: Sequence[EventRecord], b: Sequence[EventRecord]) -> list[Pair]:
    """Events that differ in content: aligned by (step, type, direction), then by position."""
    matcher = difflib.SequenceMatcher(
        None, [align_key(e) for e in a], [align_key(e) for e in b], autojunk=False
    )
    out: list[Pair] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        out += _pairs_of(op, a[i1:i2], b[j1:j2])
    return out


def match(a: Sequence[EventRecord], b: Sequence[EventRecord]) -> list[Pair]:
    """Every event of both windows, aligned: equal events line up (so an event one run has and the
    other has not stays one row, whatever surrounds it), the rest by structure and position."""
    common = 0  # the common prefix, the usual case, pairs without the matcher
    for ea, eb in zip(a, b, strict=False):
        if align_key(ea) != align_key(eb) or not same_event(ea.body, eb.body):
            break
        common += 1
    tail = 0  # and the common suffix (both windows often end inside the same identical stretch)
    while tail < min(len(a), len(b)) - common:
        ea, eb = a[len(a) - 1 - tail], b[len(b) - 1 - tail]
        if align_key(ea) != align_key(eb) or not same_event(ea.body, eb.body):
            break
        tail += 1
    pairs: list[Pair] = list(zip(a[:common], b[:common], strict=True))
    rest_a, rest_b = a[common : len(a) - tail], b[common : len(b) - tail]
    matcher = difflib.SequenceMatcher(
        None,
        [(align_key(e), fingerprint(e)) for e in rest_a],
        [(align_key(e), fingerprint(e)) for e in rest_b],
        autojunk=False,
    )
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            pairs += zip(rest_a[i1:i2], rest_b[j1:j2], strict=True)
        else:
            pairs += _by_structure(rest_a[i1:i2], rest_b[j1:j2])
    if tail:
        pairs += zip(a[len(a) - tail :], b[len(b) - tail :], strict=True)
    return pairs


def align(
    a: Sequence[EventRecord],
    b: Sequence[EventRecord],
    *,
    limit: int,
    end_a: bool,
    end_b: bool,
) -> tuple[list[Pair], int, int]:
    """Up to ``limit`` aligned pairs from the windows ``a`` and ``b`` (events in seq order after a
    synchronised point) and how many events of each were used. ``end_a``/``end_b``: the window
    reaches the end of that run's trace. Pass windows of ``limit`` events plus a lookahead:
    alignment sees that far ahead (a longer gap pairs by position instead)."""
    pairs: list[Pair] = []
    used_a = used_b = 0
    for pa, pb in match(a, b):
        if len(pairs) >= limit:
            break
        # One-sided rows once the other run's window is used up, before that run's end, may only
        # mean that its match lies beyond the window: stop there (the next window sees further).
        if pairs and (
            (pb is None and not end_b and used_b == len(b)) or (pa is None and not end_a and used_a == len(a))
        ):
            break
        pairs.append((pa, pb))
        used_a += pa is not None
        used_b += pb is not None
    return pairs, used_a, used_b


# --- rows --------------------------------------------------------------------------------------


@dataclass
class TextOp:
    op: str  # "same" | "add" | "del"
    text: str


@dataclass
class CompareRow:
    kind: str
    a: EventRecord | None
    b: EventRecord | None
    summary_a: str = ""
    summary_b: str = ""
    text_diff: list[TextOp] = field(default_factory=list)
    text_diff_mode: str = ""  # "word" | "line"
    json_diff: list[Change] = field(default_factory=list)
    json_diff_of: str = ""  # what the JSON diff compares when not the events (artifact versions)
    metrics: list[tuple[str, Delta]] = field(default_factory=list)  # model calls: tokens, cost, ms
    first_divergence: bool = False
    is_fold = False

    @property
    def is_difference(self) -> bool:
        return self.kind in (CHANGED, ONLY_A, ONLY_B)


def row_kind(a: EventRecord | None, b: EventRecord | None) -> str:
    if a is None or b is None:
        one = a or b
        if one is not None and is_marker(one.body):
            return MARKER
        return ONLY_B if a is None else ONLY_A
    if same_event(a.body, b.body):
        return SAME
    if is_marker(a.body) and is_marker(b.body):
        return MARKER
    return CHANGED


def compare_row(a: EventRecord | None, b: EventRecord | None, *, details: bool = True) -> CompareRow:
    """One aligned row; with ``details``, a changed pair also gets its text or JSON diff."""
    row = CompareRow(
        kind=row_kind(a, b),
        a=a,
        b=b,
        summary_a=summarize(a.body) if a else "",
        summary_b=summarize(b.body) if b else "",
    )
    # field by field only for events of one type: two unrelated events side by side differ as wholes
    if details and row.kind == CHANGED and a is not None and b is not None and a.type == b.type:
        _fill_diff(row, a.body, b.body)
    if details and a is not None and b is not None and a.type == b.type == "model_io":
        row.metrics = model_call_deltas(a.body, b.body)
    return row


def _usage_total(event: dict[str, Any]) -> Any:
    usage = event.get("usage")
    if not isinstance(usage, dict):
        return None
    if usage.get("totalTokens") is not None:
        return usage["totalTokens"]
    parts = [usage.get(k) for k in ("inputTokens", "outputTokens") if isinstance(usage.get(k), int)]
    return sum(parts) if parts else None


def _cost_of(event: dict[str, Any]) -> tuple[Any, str]:
    cost = event.get("cost")
    if not isinstance(cost, dict):
        return None, ""
    return cost.get("amount"), str(cost.get("currency", "")).strip().upper()


def model_call_deltas(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, Delta]]:
    """Token, cost and latency deltas of two model calls (only the measures that changed)."""
    out = [("tokens", delta(_usage_total(a), _usage_total(b)))]
    (amount_a, cur_a), (amount_b, cur_b) = _cost_of(a), _cost_of(b)
    if cur_a == cur_b or not (cur_a and cur_b):
        out.append((f"cost {cur_a or cur_b}".strip(), delta(amount_a, amount_b, cur_a or cur_b)))
    out.append(("ms", delta(a.get("durationMs"), b.get("durationMs"))))
    return [(label, d) for label, d in out if d.diff]


def _fill_diff(row: CompareRow, a: dict[str, Any], b: dict[str, Any]) -> None:
    if a.get("type") == b.get("type") == "model_io":
        ta, tb = output_text(a), output_text(b)
        if ta is not None and tb is not None and ta != tb:
            row.text_diff, row.text_diff_mode = text_diff(ta, tb)
            return
    if a.get("type") == b.get("type") == "artifact_written":
        da = (a.get("artifact") or {}).get("data") if isinstance(a.get("artifact"), dict) else None
        db = (b.get("artifact") or {}).get("data") if isinstance(b.get("artifact"), dict) else None
        row.json_diff = diff_values(da, db, limit=JSON_DIFF_LIMIT)
        if row.json_diff:
            return
    row.json_diff = diff_values(comparable(a), comparable(b), limit=JSON_DIFF_LIMIT)


_WORDS = re.compile(r"\S+\s*|\s+")  # a word with the space after it


def text_diff(before: str, after: str) -> tuple[list[TextOp], str]:
    """What changed from ``before`` to ``after``: (ops, "word" | "line"). Texts longer than
    TEXT_LIMIT are cut there (the last op then ends with an ellipsis)."""
    clipped = len(before) > TEXT_LIMIT or len(after) > TEXT_LIMIT
    before, after = before[:TEXT_LIMIT], after[:TEXT_LIMIT]
    ta = _WORDS.findall(before)
    tb = _WORDS.findall(after)
    mode = "word"
    if max(len(ta), len(tb)) > WORD_DIFF_TOKENS:
        ta, tb, mode = before.splitlines(keepends=True), after.splitlines(keepends=True), "line"
    matcher = difflib.SequenceMatcher(None, ta, tb, autojunk=False)
    ops: list[TextOp] = []

    def put(op: str, parts: Sequence[str]) -> None:
        if not parts:
            return
        text = "".join(parts)
        if ops and ops[-1].op == op:
            ops[-1].text += text
        else:
            ops.append(TextOp(op, text))

    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            put("same", ta[i1:i2])
        else:
            put("del", ta[i1:i2])
            put("add", tb[j1:j2])
    if clipped:
        ops.append(TextOp("same", "…"))
    return ops, mode


# --- deltas ------------------------------------------------------------------------------------

MINUS = "\u2212"


@dataclass
class Delta:
    a: Decimal | None
    b: Decimal | None
    diff: Decimal | None
    pct: Decimal | None
    currency: str = ""  # money: the difference is written as runs.presenters.numbers.money does

    @property
    def sign(self) -> str:
        if self.diff is None or self.diff == 0:
            return "zero"
        return "up" if self.diff > 0 else "down"

    @property
    def text(self) -> str:
        """``+12 (+30.0%)``, ``−5 (−12.5%)``, ``0``, ``+3 (new)``, ``−3 (gone)`` or ``""``."""
        if self.diff is None:
            return ""
        if self.diff == 0:
            return "0"
        number = _signed(self.diff, self.currency)
        if self.pct is None:
            return f"{number} ({'new' if self.diff > 0 else 'gone'})"
        pct = self.pct.quantize(Decimal("0.1"))
        pct_text = f"+{pct}" if pct > 0 else f"{MINUS}{-pct}" if pct < 0 else "0.0"
        return f"{number} ({pct_text}%)"


def _plain(value: Decimal) -> str:
    return numbers.plain(value)


def _signed(value: Decimal, currency: str = "") -> str:
    """``+1,234.5`` / ``−0.25``; money by the one money rule (``+3.50``, ``−0.0035``)."""
    size = numbers.money(abs(value), currency) if currency else _plain(abs(value))
    return f"+{size}" if value > 0 else f"{MINUS}{size}" if value < 0 else "0"


def number(value: Any) -> Decimal | None:
    """A JSON number as an exact Decimal (floats by their shortest text), else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, Decimal):
        return value
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value)) if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, str):
        try:
            return Decimal(value)
        except ArithmeticError:
            return None
    return None


def delta(a: Any, b: Any, currency: str = "") -> Delta:
    """B compared with A: B - A, and that as a percentage of A (None when A is 0 or missing);
    with a ``currency`` the difference is money (written by runs.presenters.numbers.money)."""
    da, db = number(a), number(b)
    if da is None and db is None:
        return Delta(None, None, None, None, currency)
    diff = (db or Decimal(0)) - (da or Decimal(0))
    pct = diff * 100 / da if da else None
    return Delta(da, db, diff, pct, currency)


# --- summaries side by side ---------------------------------------------------------------------


@dataclass
class MetricRow:
    label: str
    a: str
    b: str
    delta: Delta | None = None


NOT_PRICED = "— (its model calls are not priced)"
STILL_RUNNING = "— (still running)"


def _side_cost(costs: dict[str, Any], cur: str, calls: Any) -> str:
    """One run's cost in ``cur``, never an empty cell: its amount; 0 when it truly spent nothing
    in it (no model call, or its calls were priced in another currency); else why it is unknown."""
    if cur in costs:
        return numbers.money(costs[cur], cur)
    if costs or not (number(calls) or 0):
        return "0"
    return NOT_PRICED


def _cost_rows(
    label: str, cost_a: dict[str, Any], cost_b: dict[str, Any], calls_a: Any = None, calls_b: Any = None
) -> list[MetricRow]:
    currencies = list(dict.fromkeys([*cost_a, *cost_b]))
    return [
        MetricRow(
            f"{label} ({cur})",
            _side_cost(cost_a, cur, calls_a),
            _side_cost(cost_b, cur, calls_b),
            delta(cost_a.get(cur, 0), cost_b.get(cur, 0), cur),
        )
        for cur in currencies
    ]


TOKEN_FIELDS = (
    ("inputTokens", "Input tokens"),
    ("outputTokens", "Output tokens"),
    ("totalTokens", "Total tokens"),
)


def total_rows(sa: dict[str, Any], sb: dict[str, Any]) -> list[MetricRow]:
    """Run totals of A and B with B's delta (events, model calls, tokens, cost, model time, wall time)."""
    ta, tb = sa["totals"], sb["totals"]
    rows = [
        MetricRow(
            "Events", count(sa["last_seq"]), count(sb["last_seq"]), delta(sa["last_seq"], sb["last_seq"])
        ),
        MetricRow(
            "Model calls",
            count(ta["eventCount"]),
            count(tb["eventCount"]),
            delta(ta["eventCount"], tb["eventCount"]),
        ),
    ]
    for key, label in TOKEN_FIELDS:
        rows.append(MetricRow(label, count(ta[key]), count(tb[key]), delta(ta[key], tb[key])))
    rows += _cost_rows("Cost", sa["exact_cost"], sb["exact_cost"], ta["eventCount"], tb["eventCount"])
    rows.append(
        MetricRow(
            "Model latency (ms)",
            count(ta["durationMs"]),
            count(tb["durationMs"]),
            delta(ta["durationMs"], tb["durationMs"]),
        )
    )
    wa, wb = sa.get("wall_seconds"), sb.get("wall_seconds")
    if wa is None and wb is None:
        return rows
    rows.append(
        MetricRow(
            "Wall time (s)",
            STILL_RUNNING if wa is None else _plain(number(wa) or Decimal(0)),
            STILL_RUNNING if wb is None else _plain(number(wb) or Decimal(0)),
            delta(wa, wb) if wa is not None and wb is not None else None,
        )
    )
    return rows


@dataclass
class StepRow:
    step: str
    status_a: str
    status_b: str
    gates_a: list[str]
    gates_b: list[str]
    metrics: list[MetricRow]

    @property
    def differs(self) -> bool:
        return (
            self.status_a != self.status_b
            or self.gates_a != self.gates_b
            or any(m.delta is not None and m.delta.sign != "zero" for m in self.metrics)
        )


def step_rows(sa: dict[str, Any], sb: dict[str, Any]) -> list[StepRow]:
    """One row per step of either run (workflow order, then steps only the ledger knows)."""
    order = list(
        dict.fromkeys(
            [
                *sa["steps"],
                *sb["steps"],
                *sa["by_step"],
                *sb["by_step"],
                *sa["step_status"],
                *sb["step_status"],
            ]
        )
    )
    rows = []
    for step in order:
        la, lb = sa["by_step"].get(step), sb["by_step"].get(step)
        metrics = [
            MetricRow(
                "Tokens",
                count(la["totalTokens"]) if la else "",
                count(lb["totalTokens"]) if lb else "",
                delta(la["totalTokens"] if la else None, lb["totalTokens"] if lb else None),
            )
        ]
        metrics += _cost_rows("Cost", la["costByCurrency"] if la else {}, lb["costByCurrency"] if lb else {})
        metrics.append(
            MetricRow(
                "Model ms",
                count(la["durationMs"]) if la else "",
                count(lb["durationMs"]) if lb else "",
                delta(la["durationMs"] if la else None, lb["durationMs"] if lb else None),
            )
        )
        secs_a, secs_b = sa["step_seconds"].get(step), sb["step_seconds"].get(step)
        metrics.append(
            MetricRow(
                "Step time (s)",
                "" if secs_a is None else _plain(number(secs_a) or Decimal(0)),
                "" if secs_b is None else _plain(number(secs_b) or Decimal(0)),
                delta(secs_a, secs_b),
            )
        )
        rows.append(
            StepRow(
                step=step,
                status_a=sa["step_status"].get(step, ""),
                status_b=sb["step_status"].get(step, ""),
                gates_a=sa["gates"].get(step, []),
                gates_b=sb["gates"].get(step, []),
                metrics=metrics,
            )
        )
    return rows


@dataclass
class ArtifactRow:
    key: str
    kind: str  # same | changed | only_a | only_b
    version_a: int | None
    version_b: int | None
    versions_a: int
    versions_b: int
    changes: list[Change]


def artifact_rows(sa: dict[str, Any], sb: dict[str, Any]) -> list[ArtifactRow]:
    """The latest version of every artifact key in A and B, and what differs in their data, by path."""
    rows = []
    for key in dict.fromkeys([*sa["artifacts"], *sb["artifacts"]]):
        va, vb = sa["artifacts"].get(key), sb["artifacts"].get(key)
        if va is None or vb is None:
            kind, changes = (ONLY_B if va is None else ONLY_A), []
        else:
            changes = diff_values(va.get("data"), vb.get("data"), limit=JSON_DIFF_LIMIT)
            if not changes:  # data kept outside (a pointer): the pointers say whether it differs
                changes = diff_values(
                    va.get("pointer"), vb.get("pointer"), path="/pointer", limit=JSON_DIFF_LIMIT
                )
            kind = CHANGED if changes or va.get("typeId") != vb.get("typeId") else SAME
        rows.append(
            ArtifactRow(
                key=key,
                kind=kind,
                version_a=va.get("version") if va else None,
                version_b=vb.get("version") if vb else None,
                versions_a=sa["artifact_versions"].get(key, 0),
                versions_b=sb["artifact_versions"].get(key, 0),
                changes=changes,
            )
        )
    return rows


@dataclass
class Folded:
    """Consecutive identical rows, shown folded."""

    rows: list[CompareRow]
    is_fold = True

    @property
    def first(self) -> CompareRow:
        return self.rows[0]

    @property
    def last(self) -> CompareRow:
        return self.rows[-1]


def fold_same(rows: Sequence[CompareRow], *, at_least: int = 4) -> list[CompareRow | Folded]:
    """Runs of ``at_least`` or more consecutive ``same`` rows become one :class:`Folded` block."""
    out: list[CompareRow | Folded] = []
    run: list[CompareRow] = []

    def flush() -> None:
        if len(run) >= at_least:
            out.append(Folded(list(run)))
        else:
            out.extend(run)
        run.clear()

    for row in rows:
        if row.kind == SAME and not row.first_divergence:
            run.append(row)
        else:
            flush()
            out.append(row)
    flush()
    return out
