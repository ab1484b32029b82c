"""``manage.py experiment gate --baseline B --candidate C [--max-regressions 0] [--min-score 0.8]
[--json out.json] [--junit out.xml]``: the CI gate. Exits 1 when any item regressed beyond the
allowance or the candidate's mean score is below the minimum, 0 otherwise; writes the verdict as
JSON and as JUnit XML (one test case per item, plus the gate).

``manage.py experiment run <id>``: run a pending experiment here (when no task worker does).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evals import scoring
from evals.models import Experiment, ExperimentItem, ExperimentStatus
from evals.runner import run_experiment


def _experiment(public_id: str) -> Experiment:
    # An operator's command: experiments are named by their globally unique public ids.
    found = Experiment.objects.select_related("workspace").filter(public_id=public_id).first()
    if found is None:
        raise CommandError(f"no experiment {public_id!r}")
    return found


class Command(BaseCommand):
    help = "Experiments from the command line: the CI gate, and running a pending experiment."

    def add_arguments(self, parser) -> None:
        sub = parser.add_subparsers(dest="what", required=True)
        gate = sub.add_parser("gate", help="compare a candidate with its baseline; exit 1 on a regression")
        gate.add_argument("--baseline", required=True)
        gate.add_argument("--candidate", required=True)
        gate.add_argument("--max-regressions", type=int, default=0)
        gate.add_argument("--min-score", type=float, default=None)
        gate.add_argument("--json", dest="json_path", default=None, help="write the verdict as JSON here")
        gate.add_argument("--junit", dest="junit_path", default=None, help="write JUnit XML here")
        run = sub.add_parser("run", help="run a pending experiment in this process")
        run.add_argument("experiment")

    def handle(self, *args, **options) -> None:
        if options["what"] == "run":
            experiment = run_experiment(_experiment(options["experiment"]).pk)
            self.stdout.write(json.dumps({"id": experiment.public_id, "status": experiment.status}))
            return
        self.gate(options)

    def gate(self, options: dict) -> None:
        baseline, candidate = _experiment(options["baseline"]), _experiment(options["candidate"])
        if baseline.workspace_id != candidate.workspace_id or baseline.dataset_id != candidate.dataset_id:
            raise CommandError("baseline and candidate must be experiments over the same dataset")
        for experiment in (baseline, candidate):
            if experiment.status != ExperimentStatus.COMPLETED:
                raise CommandError(f"experiment {experiment.public_id} is {experiment.status}, not completed")

        def scores(experiment: Experiment) -> dict[str, float | None]:
            return dict(ExperimentItem.objects.filter(experiment=experiment).values_list("item_key", "score"))

        rows = scoring.compare(scores(baseline), scores(candidate))
        mean = (candidate.summary.get("meanScore") or {}).get("mean")
        verdict = scoring.gate_verdict(
            rows, mean, max_regressions=options["max_regressions"], min_score=options["min_score"]
        )
        report = {
            "baseline": baseline.public_id,
            "candidate": candidate.public_id,
            "meanScore": candidate.summary.get("meanScore"),
            "baselineMeanScore": baseline.summary.get("meanScore"),
            **verdict,
            "items": [
                {
                    "itemId": r.item_key,
                    "baseline": r.baseline,
                    "candidate": r.candidate,
                    "regressed": r.regressed,
                }
                for r in rows
            ],
        }
        if options["json_path"]:
            Path(options["json_path"]).write_text(json.dumps(report, indent=2) + "\n")
        if options["junit_path"]:
            name = f"experiment {candidate.name} vs {baseline.name}"
            Path(options["junit_path"]).write_text(scoring.junit_xml(name, rows, verdict))
        word = "passed" if verdict["passed"] else "FAILED: " + "; ".join(verdict["reasons"])
        self.stdout.write(f"experiment gate {word}")
        if not verdict["passed"]:
            sys.exit(1)
