"""`manage.py fork RUN_ID --workspace SLUG [--mode replay|branch] [--from-seq N] [--overlay JSON] [--wait]`

Seed 002's fork from the command line, through the same action as the REST endpoint. Prints the
fork as one JSON line; with ``--wait`` the fork is re-executed in this process (when the
workbench has its workflow's step code) and the determinism report of a replay is printed too.
``manage.py fork report RUN_ID --workspace SLUG`` prints the report of an existing replay.
"""

from __future__ import annotations

import orjson
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.actions import ActionError
from runs.actions.forks import determinism_report, do_fork_with_history
from runs.execution.replay import run_fork
from runs.models import ForkStatus, Workspace
from runs.selectors.runs import RunNotFound, get_fork


class Command(BaseCommand):
    help = "Fork a run (replay or branch from any seq), or print a replay's determinism report."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id", help="the source run (or, after 'report', the replay)")
        parser.add_argument("report_run_id", nargs="?", help=argparse_hidden())
        parser.add_argument("--workspace", required=True, help="slug of the workspace of the run")
        parser.add_argument("--mode", choices=["replay", "branch"], default="replay")
        parser.add_argument("--from-seq", type=int, default=None, help="events < N are fixed history")
        parser.add_argument(
            "--overlay",
            default=None,
            help='branch only: JSON, e.g. {"gateDecisions": {"review": "rejected"}}',
        )
        parser.add_argument("--actor", default="cli")
        parser.add_argument("--wait", action="store_true", help="re-execute here and print the report")

    def handle(self, *args, **options) -> None:
        workspace = Workspace.objects.filter(slug=options["workspace"]).first()
        if workspace is None:
            raise CommandError(f"no workspace {options['workspace']!r}")
        if options["run_id"] == "report":
            if not options["report_run_id"]:
                raise CommandError("usage: fork report REPLAY_RUN_ID --workspace SLUG")
            try:
                fork = get_fork(workspace, options["report_run_id"])
            except RunNotFound:
                raise CommandError(
                    f"UNKNOWN_RUN: no fork {options['report_run_id']!r} in this workspace"
                ) from None
            self._print(determinism_report(fork))
            return
        overlay = None
        if options["overlay"]:
            try:
                overlay = orjson.loads(options["overlay"])
            except orjson.JSONDecodeError as exc:
                raise CommandError(f"INVALID_INPUT: --overlay is not JSON: {exc}") from None
        try:
            fork = do_fork_with_history(
                workspace=workspace,
                source_run_id=options["run_id"],
                mode=options["mode"],
                from_seq=options["from_seq"],
                overlay=overlay,
                actor=options["actor"],
            )
        except ActionError as exc:
            raise CommandError(str(exc)) from None
        if options["wait"] and fork.status == ForkStatus.PENDING:
            fork = run_fork(fork.pk) or fork
        fork.refresh_from_db()
        out = {
            "runId": fork.run.run_id,
            "sourceRunId": fork.source_run_id,
            "fromSeq": fork.from_seq,
            "mode": fork.mode,
            "status": fork.status,
        }
        if fork.error_code:
            out["error"] = {"code": fork.error_code, "message": fork.error_message}
        if options["wait"] and fork.mode == "replay":
            out["determinism"] = determinism_report(fork)
        self._print(out)

    def _print(self, value: dict) -> None:
        self.stdout.write(orjson.dumps(value).decode())


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS
