"""The CI gate: exit 1 on a planted regression (a changed draft model changes every reply), 0
without it; JSON and JUnit XML written."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from django.core.management import call_command

from evals import actions
from evals.runner import run_experiment


def _run(workspace, dataset, name, change, baseline=None):
    experiment = actions.do_create_experiment(
        workspace=workspace, dataset=dataset, name=name, change=change, baseline=baseline
    )
    return run_experiment(experiment.pk)


def _gate(baseline, candidate, tmp_path, **kw):
    args = ["experiment", "gate", "--baseline", baseline.public_id, "--candidate", candidate.public_id]
    args += ["--json", str(tmp_path / "gate.json"), "--junit", str(tmp_path / "gate.xml")]
    for key, value in kw.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    try:
        call_command(*args)
    except SystemExit as exc:
        return exc.code
    return 0


@pytest.mark.django_db
def test_the_gate_fails_on_a_planted_regression_and_passes_without(workspace, gate_dataset, tmp_path):
    baseline = _run(workspace, gate_dataset, "baseline", {})
    same = _run(workspace, gate_dataset, "same", {}, baseline)
    assert _gate(baseline, same, tmp_path, max_regressions=0, min_score=0.8) == 0
    report = json.loads((tmp_path / "gate.json").read_text())
    assert report["passed"] is True and report["regressions"] == []
    suite = ET.parse(tmp_path / "gate.xml").getroot()
    assert suite.get("failures") == "0" and suite.get("tests") == "4"

    planted = _run(
        workspace, gate_dataset, "haiku", {"configurable": {"draftModel": "claude-haiku-4-5"}}, baseline
    )
    assert _gate(baseline, planted, tmp_path, max_regressions=0, min_score=0.8) == 1
    report = json.loads((tmp_path / "gate.json").read_text())
    assert report["passed"] is False and len(report["regressions"]) == 3
    suite = ET.parse(tmp_path / "gate.xml").getroot()
    assert suite.get("failures") == "4"
    assert len(suite.findall("testcase/failure")) == 4
    # allowing the regressions and no minimum: it passes
    assert _gate(baseline, planted, tmp_path, max_regressions=3) == 0
