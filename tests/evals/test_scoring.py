"""The pure scoring module: evaluators, intervals, regressions, agreement, JUnit."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from evals import scoring


def test_exact_and_jsonpath():
    exact = scoring.check_evaluator(None)
    assert scoring.evaluate(exact, {"a": 1}, {"a": 1.0}, {}) == 1.0
    assert scoring.evaluate(exact, {"a": True}, {"a": 1}, {}) == 0.0
    spec = scoring.check_evaluator({"kind": "jsonpath", "paths": ["$.a.b[0]", '$["c d"]']})
    assert scoring.evaluate(spec, {"a": {"b": [1]}, "c d": 2}, {"a": {"b": [1]}, "c d": 3}, {}) == 0.5
    with pytest.raises(scoring.EvaluatorError):
        scoring.check_evaluator({"kind": "jsonpath", "paths": ["a.b"]})
    with pytest.raises(scoring.EvaluatorError):
        scoring.check_evaluator({"kind": "function", "name": "nope"})


def test_registered_function_with_version():
    scoring.register("len-match", lambda out, exp, item: float(len(str(out)) == len(str(exp))), version="2")
    try:
        spec = scoring.check_evaluator({"kind": "function", "name": "len-match"})
        assert spec == {"kind": "function", "name": "len-match", "version": "2"}
        assert scoring.evaluator_label(spec) == "function:len-match@2"
        assert scoring.evaluate(spec, "abc", "xyz", {}) == 1.0
    finally:
        scoring.unregister("len-match")


def test_mean_interval_uses_student_t():
    assert scoring.mean_interval([]) == {"n": 0, "mean": None, "low": None, "high": None}
    out = scoring.mean_interval([0, 1, 1, 1])
    half = 3.182 * math.sqrt(0.25 / 4)
    assert out["mean"] == 0.75 and math.isclose(out["high"] - out["mean"], half)


def test_compare_gate_and_junit():
    rows = scoring.compare({"a": 1.0, "b": 0.5, "c": 1.0}, {"a": 0.0, "b": 1.0, "c": None})
    assert [r.item_key for r in rows if r.regressed] == ["a", "c"]
    verdict = scoring.gate_verdict(rows, 0.5, max_regressions=0, min_score=0.8)
    assert not verdict["passed"] and len(verdict["reasons"]) == 2
    xml = scoring.junit_xml('n "q"', rows, verdict)
    suite = ET.fromstring(xml)
    assert suite.get("failures") == "3" and suite.get("name") == 'n "q"'


def test_cohen_kappa():
    perfect = scoring.cohen_kappa([(True, True), (False, False)] * 5)
    assert perfect["kappa"] == 1.0 and perfect["tpr"] == 1.0 and perfect["tnr"] == 1.0
    chance = scoring.cohen_kappa([(True, True), (True, False), (False, True), (False, False)])
    assert chance["kappa"] == 0.0
    assert scoring.cohen_kappa([])["kappa"] is None
