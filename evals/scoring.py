"""Pure scoring and statistics of experiments: evaluators, intervals, regressions, agreement.

No Django here (tests/ops/test_layers.py keeps it so): everything takes and returns plain values.

Evaluators compare an experiment item's output with its expected value and return a score in
[0, 1]:

* ``exact``: 1.0 when output and expected are equal JSON values, else 0.0;
* ``jsonpath``: the share of ``paths`` (``$.a.b[0]`` style) whose values are equal in both;
* ``function``: a registered evaluator function, by name (:func:`register`), with a version, so
  re-scoring with a new version is a new, recorded score;
* ``judge``: an LLM judge (``model``, ``prompt``, ``version``): its model call is made by a
  ``judge`` callable the caller passes in (``evals.judge``: recorded as a run's ``model_io``
  through the response cache), so this module stays pure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from xml.sax.saxutils import quoteattr

EvaluatorFn = Callable[[Any, Any, dict[str, Any]], float]

JudgeFn = Callable[[dict[str, Any], Any, Any, dict[str, Any]], float]

EVALUATOR_KINDS = ("exact", "jsonpath", "function", "judge")
JUDGE_PROVIDERS = ("anthropic", "openai")
MAX_JUDGE_PROMPT = 20_000


class EvaluatorError(ValueError):
    """An evaluator spec that cannot be used (unknown kind or function, bad path)."""


@dataclass(frozen=True)
class Registered:
    name: str
    version: str
    fn: EvaluatorFn


_functions: dict[str, Registered] = {}


def register(name: str, fn: EvaluatorFn, *, version: str = "1") -> None:
    """Make ``fn(output, expected, item) -> score`` usable as ``{"kind": "function", "name": name}``."""
    _functions[name] = Registered(name, version, fn)


def unregister(name: str) -> None:
    _functions.pop(name, None)


def registered(name: str) -> Registered | None:
    return _functions.get(name)


_PATH_TOKEN = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]|\[\"([^\"]*)\"\]")


def parse_path(path: str) -> list[str | int]:
    """``$.a.b[0]["c d"]`` -> ``["a", "b", 0, "c d"]`` (a small, strict JSONPath subset)."""
    if not isinstance(path, str) or not path.startswith("$"):
        raise EvaluatorError(f"a JSON path starts with $: {path!r}")
    parts: list[str | int] = []
    pos = 1
    while pos < len(path):
        match = _PATH_TOKEN.match(path, pos)
        if match is None:
            raise EvaluatorError(f"cannot read the JSON path {path!r} at character {pos}")
        name, index, quoted = match.groups()
        parts.append(int(index) if index is not None else (name if name is not None else quoted))
        pos = match.end()
    return parts


_MISSING = object()


def value_at(document: Any, parts: Sequence[str | int]) -> Any:
    here = document
    for part in parts:
        if isinstance(part, int) and isinstance(here, list) and 0 <= part < len(here):
            here = here[part]
        elif isinstance(part, str) and isinstance(here, dict) and part in here:
            here = here[part]
        else:
            return _MISSING
    return here


def check_evaluator(spec: Any) -> dict[str, Any]:
    """The normalised evaluator spec, or :class:`EvaluatorError`."""
    if spec is None or spec == {}:
        return {"kind": "exact"}
    if not isinstance(spec, dict):
        raise EvaluatorError('evaluator must be an object such as {"kind": "exact"}')
    kind = spec.get("kind")
    if kind not in EVALUATOR_KINDS:
        raise EvaluatorError(f"evaluator kind must be one of {', '.join(EVALUATOR_KINDS)}")
    if kind == "jsonpath":
        paths = spec.get("paths")
        if not isinstance(paths, list) or not paths:
            raise EvaluatorError("a jsonpath evaluator needs paths: a non-empty list of JSON paths")
        for path in paths:
            parse_path(path)
        return {"kind": kind, "paths": list(paths)}
    if kind == "function":
        found = registered(spec.get("name") or "")
        if found is None:
            raise EvaluatorError(f"no evaluator function is registered as {spec.get('name')!r}")
        return {"kind": kind, "name": found.name, "version": found.version}
    if kind == "judge":
        return check_judge(spec)
    return {"kind": kind}


def _text(spec: dict[str, Any], field: str, default: str | None, limit: int) -> str:
    value = spec.get(field, default)
    if not isinstance(value, str) or not value.strip() or len(value) > limit or "\x00" in value:
        raise EvaluatorError(
            f"a judge evaluator needs {field}: a non-empty string of at most {limit} characters"
        )
    return value


def check_judge(spec: dict[str, Any]) -> dict[str, Any]:
    """``{"kind": "judge", "model", "prompt", "version"?, "provider"?}``. The prompt may name
    ``{input}``, ``{output}`` and ``{expected}`` (replaced by their JSON); the model answers
    PASS or FAIL (or a score from 0 to 1)."""
    provider = spec.get("provider", "anthropic")
    if provider not in JUDGE_PROVIDERS:
        raise EvaluatorError(f"a judge's provider is one of {', '.join(JUDGE_PROVIDERS)}")
    return {
        "kind": "judge",
        "provider": provider,
        "model": _text(spec, "model", None, 200),
        "prompt": _text(spec, "prompt", None, MAX_JUDGE_PROMPT),
        "version": _text(spec, "version", "1", 50),
    }


_VERDICT = re.compile(r"\b(PASS|FAIL)\b|(\d+(?:\.\d+)?)", re.IGNORECASE)


def judge_verdict(answer: str) -> float:
    """A judge's answer as a score: PASS 1.0, FAIL 0.0, or the first number in [0, 1]."""
    match = _VERDICT.search(answer or "")
    if match is None:
        raise EvaluatorError(f"the judge answered {answer[:80]!r}: neither PASS, FAIL nor a score")
    word, number = match.groups()
    if word:
        return 1.0 if word.upper() == "PASS" else 0.0
    score = float(number)
    if not 0.0 <= score <= 1.0:
        raise EvaluatorError(f"the judge answered the score {score}, not one in [0, 1]")
    return score


def evaluate(
    spec: dict[str, Any], output: Any, expected: Any, item: dict[str, Any], *, judge: JudgeFn | None = None
) -> float:
    """Score one item with a checked spec (``judge`` makes a judge evaluator's model call)."""
    kind = spec["kind"]
    if kind == "judge":
        if judge is None:
            raise EvaluatorError("a judge evaluator needs a judge to call the model")
        return judge(spec, output, expected, item)
    if kind == "exact":
        return 1.0 if same_json(output, expected) else 0.0
    if kind == "jsonpath":
        hits = 0
        for path in spec["paths"]:
            parts = parse_path(path)
            got, want = value_at(output, parts), value_at(expected, parts)
            hits += int(got is not _MISSING and want is not _MISSING and same_json(got, want))
        return hits / len(spec["paths"])
    found = registered(spec["name"])
    if found is None:
        raise EvaluatorError(f"no evaluator function is registered as {spec['name']!r}")
    score = float(found.fn(output, expected, item))
    if math.isnan(score) or not 0.0 <= score <= 1.0:
        raise EvaluatorError(f"evaluator {found.name!r} returned {score}, not a score in [0, 1]")
    return score


def same_json(a: Any, b: Any) -> bool:
    """Equal as JSON values (1 == 1.0, but True != 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def evaluator_label(spec: dict[str, Any]) -> str:
    if spec["kind"] == "function":
        return f"function:{spec['name']}@{spec['version']}"
    if spec["kind"] == "judge":
        return f"judge:{spec['model']}@{spec['version']}"
    if spec["kind"] == "jsonpath":
        return "jsonpath:" + ",".join(spec["paths"])
    return "exact"


# statistics ----------------------------------------------------------------------------------

# Two-sided 95% critical values of Student's t by degrees of freedom (1..30); beyond, the normal's.
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t95(df: int) -> float:
    if df < 1:
        return math.inf
    return _T95[df - 1] if df <= len(_T95) else 1.96


def mean_interval(values: Iterable[float]) -> dict[str, Any]:
    """``{n, mean, low, high}``: the mean and its 95% interval (Student's t; None when empty,
    the mean itself when n = 1 or all values agree)."""
    xs = [float(v) for v in values]
    n = len(xs)
    if n == 0:
        return {"n": 0, "mean": None, "low": None, "high": None}
    mean = sum(xs) / n
    if n == 1:
        return {"n": 1, "mean": mean, "low": mean, "high": mean}
    var = sum((x - mean) ** 2 for x in xs) / (n - 1)
    half = t95(n - 1) * math.sqrt(var / n)
    return {"n": n, "mean": mean, "low": mean - half, "high": mean + half}


@dataclass(frozen=True)
class Comparison:
    item_key: str
    baseline: float | None
    candidate: float | None

    @property
    def delta(self) -> float | None:
        if self.baseline is None or self.candidate is None:
            return None
        return self.candidate - self.baseline

    @property
    def regressed(self) -> bool:
        """Worse than the baseline (a score lost, or an item the baseline scored that is unscored now)."""
        if self.baseline is None:
            return False
        return self.candidate is None or self.candidate < self.baseline - 1e-9


def compare(baseline: dict[str, float | None], candidate: dict[str, float | None]) -> list[Comparison]:
    """Per item (the candidate's items), worst regressions first."""
    rows = [Comparison(key, baseline.get(key), score) for key, score in candidate.items()]
    return sorted(rows, key=lambda r: (not r.regressed, r.delta if r.delta is not None else 0.0, r.item_key))


def gate_verdict(
    rows: list[Comparison], candidate_mean: float | None, *, max_regressions: int, min_score: float | None
) -> dict[str, Any]:
    """The CI gate: passes when regressions <= max_regressions and the mean score >= min_score."""
    regressions = [r.item_key for r in rows if r.regressed]
    reasons = []
    if len(regressions) > max_regressions:
        reasons.append(f"{len(regressions)} item(s) regressed (at most {max_regressions} allowed)")
    if min_score is not None and (candidate_mean is None or candidate_mean < min_score):
        reasons.append(f"mean score {candidate_mean} is below {min_score}")
    return {"passed": not reasons, "regressions": regressions, "reasons": reasons}


def junit_xml(name: str, rows: list[Comparison], verdict: dict[str, Any]) -> str:
    """One test case per item (failed when it regressed), plus one for the gate as a whole."""
    cases = []
    for row in sorted(rows, key=lambda r: r.item_key):
        body = ""
        if row.regressed:
            message = f"score {row.candidate} < baseline {row.baseline}"
            body = f"<failure message={quoteattr(message)}/>"
        cases.append(
            f"<testcase classname={quoteattr(name)} name={quoteattr(row.item_key)}>{body}</testcase>"
        )
    gate_body = ""
    if not verdict["passed"]:
        gate_body = f"<failure message={quoteattr('; '.join(verdict['reasons']))}/>"
    cases.append(f'<testcase classname={quoteattr(name)} name="gate">{gate_body}</testcase>')
    failures = sum(1 for r in rows if r.regressed) + (0 if verdict["passed"] else 1)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuite name={quoteattr(name)} tests="{len(cases)}" failures="{failures}">'
        + "".join(cases)
        + "</testsuite>\n"
    )


def cohen_kappa(pairs: Iterable[tuple[bool, bool]]) -> dict[str, Any]:
    """Agreement of a judge (first) with people (second) on pass/fail: kappa, TPR, TNR, confusion."""
    tp = fp = tn = fn = 0
    for judge, human in pairs:
        if judge and human:
            tp += 1
        elif judge and not human:
            fp += 1
        elif not judge and human:
            fn += 1
        else:
            tn += 1
    n = tp + fp + tn + fn
    out: dict[str, Any] = {"n": n, "confusion": {"tp": tp, "fp": fp, "tn": tn, "fn": fn}}
    if n == 0:
        return {**out, "kappa": None, "tpr": None, "tnr": None, "agreement": None}
    observed = (tp + tn) / n
    expected = ((tp + fp) * (tp + fn) + (tn + fn) * (tn + fp)) / (n * n)
    kappa = 1.0 if expected == 1 else (observed - expected) / (1 - expected)
    return {
        **out,
        "kappa": kappa,
        "agreement": observed,
        "tpr": tp / (tp + fn) if tp + fn else None,
        "tnr": tn / (tn + fp) if tn + fp else None,
    }


def summarize(items: list[dict[str, Any]], baseline: dict[str, float | None] | None = None) -> dict[str, Any]:
    """An experiment's summary from its items' facts (``item_facts``): counts, totals, and each
    mean with its 95% interval; with a baseline's scores, regressions and improvements."""
    statuses: dict[str, int] = {}
    for item in items:
        statuses[item["status"]] = statuses.get(item["status"], 0) + 1
    cost = sum((Decimal(i["cost"]) for i in items), Decimal(0))
    delta = sum((Decimal(i["costDelta"]) for i in items), Decimal(0))
    done = [i for i in items if i["status"] == "completed"]
    summary: dict[str, Any] = {
        "n": len(items),
        "statuses": dict(sorted(statuses.items())),
        "providerCalls": sum(i["providerCalls"] for i in items),
        "cacheHits": sum(i["cacheHits"] for i in items),
        "tokens": sum(i["tokens"] for i in items),
        "cost": format(cost, "f"),
        "costDelta": format(delta, "f"),
        "meanScore": mean_interval(i["score"] for i in items if i["score"] is not None),
        "meanCostDelta": mean_interval(float(Decimal(i["costDelta"])) for i in done),
        "meanLatencyMs": mean_interval(i["latencyMs"] for i in done if i["latencyMs"] is not None),
        "meanProviderCalls": mean_interval(i["providerCalls"] for i in done),
    }
    if baseline is not None:
        rows = compare(baseline, {i["itemId"]: i["score"] for i in items})
        summary["baseline"] = {
            "meanScore": mean_interval(s for s in baseline.values() if s is not None),
            "regressions": sum(1 for r in rows if r.regressed),
            "improvements": sum(1 for r in rows if r.delta is not None and r.delta > 1e-9),
        }
    return summary
