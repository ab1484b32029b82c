"""Agreement of a judge with people (pure): confusion matrix, Cohen's kappa with a 95 % confidence
interval, TPR and TNR ("approved" is the positive class), over (judge, person) decision pairs.

    agreement([("approved", "approved"), ("approved", "rejected"), ...])   # (judge, human)
    -> {"n", "matrix": {"tp", "fp", "fn", "tn"}, "kappa", "kappaLow", "kappaHigh", "tpr", "tnr",
        "observed"}

The interval is the usual large-sample one, kappa +/- 1.96 * sqrt(p_o (1 - p_o) / (n (1 - p_e)^2))
(Cohen 1960), clipped to [-1, 1]; None where it is undefined.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from review.agreement import cohen_kappa

POSITIVE = "approved"
Z95 = 1.959963984540054


def _ratio(a: int, b: int) -> float | None:
    return a / b if b else None


def agreement(pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    n = len(pairs)
    tp = sum(1 for j, h in pairs if j == POSITIVE and h == POSITIVE)
    fp = sum(1 for j, h in pairs if j == POSITIVE and h != POSITIVE)
    fn = sum(1 for j, h in pairs if j != POSITIVE and h == POSITIVE)
    tn = n - tp - fp - fn
    kappa = cohen_kappa(pairs) if n else None
    low = high = None
    observed = (tp + tn) / n if n else None
    if kappa is not None and observed is not None:
        expected = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (n * n)
        if expected < 1:
            se = math.sqrt(observed * (1 - observed) / (n * (1 - expected) ** 2))
            low, high = max(-1.0, kappa - Z95 * se), min(1.0, kappa + Z95 * se)
    return {
        "n": n,
        "matrix": {"tp": tp, "fp": fp, "fn": fn, "tn": tn},
        "kappa": kappa,
        "kappaLow": low,
        "kappaHigh": high,
        "tpr": _ratio(tp, tp + fn),
        "tnr": _ratio(tn, tn + fp),
        "observed": observed,
    }


def meets(stats: dict[str, Any], *, floor: float, min_items: int) -> tuple[bool, str]:
    """Whether agreement earns delegation: at least ``min_items`` pairs and kappa >= ``floor``;
    the reason in words either way."""
    n, kappa = stats["n"], stats["kappa"]
    if n < min_items:
        return False, f"{n} human-decided item{'s' if n != 1 else ''} in the window; {min_items} needed"
    if kappa is None or kappa < floor:
        shown = "undefined" if kappa is None else f"{kappa:.3f}"
        return False, f"kappa {shown} is below the floor {floor:g}"
    return True, f"kappa {kappa:.3f} >= {floor:g} on {n} items"


def below_floor(stats: dict[str, Any], *, floor: float) -> bool:
    """Drift: agreement under the floor (undefined kappa counts by observed agreement)."""
    kappa = stats["kappa"]
    if kappa is None:
        observed = stats["observed"]
        return observed is not None and observed < floor
    return bool(kappa < floor)


def parse_verdict(text: str) -> tuple[str, float, str]:
    """(decision, confidence, rationale) from a judge's answer: JSON ``{"decision": "approve" |
    "reject", "confidence": 0..1, "rationale": "..."}``, else the first APPROVE / REJECT word and a
    ``confidence: 0.x``. ValueError when neither says a decision."""
    raw = text.strip()
    start, end = raw.find("{"), raw.rfind("}")
    if start != -1 and end > start:
        try:
            doc = json.loads(raw[start : end + 1])
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            decision = _decision(str(doc.get("decision", "")))
            if decision:
                confidence = _confidence(doc.get("confidence"))
                return decision, confidence, str(doc.get("rationale") or "")[:2000]
    upper = raw.upper()
    spots = [(upper.find(w), w) for w in ("APPROVE", "REJECT") if w in upper]
    if not spots:
        raise ValueError("the judge's answer names no decision (approve or reject)")
    decision = "approved" if min(spots)[1] == "APPROVE" else "rejected"
    confidence = 0.5
    lower = raw.lower()
    at = lower.find("confidence")
    if at != -1:
        digits = "".join(c for c in lower[at + 10 : at + 30] if c.isdigit() or c == ".").strip(".")
        confidence = _confidence(digits)
    return decision, confidence, raw[:2000]


def _decision(text: str) -> str:
    word = text.strip().lower()
    if word in ("approve", "approved", "yes", "pass"):
        return "approved"
    if word in ("reject", "rejected", "no", "fail"):
        return "rejected"
    return ""


def _confidence(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.5
    if math.isnan(number):
        return 0.5
    return min(1.0, max(0.0, number))
