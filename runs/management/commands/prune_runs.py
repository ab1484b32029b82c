"""`manage.py prune_runs [--days N] [--workspace SLUG] [--batch 10000] [--dry-run]`: delete ended
runs older than N days in bounded batches (runs.actions.retention: no long transaction, however
long the run), and finish any purge that was interrupted.

``--days`` defaults to ``WORKBENCH_RUN_RETENTION_DAYS`` (0, the default, keeps every run: nothing
is deleted unless an operator sets it or asks).
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from runs.actions.retention import PURGE_BATCH, do_prune_runs, old_runs
from runs.models import Workspace


class Command(BaseCommand):
    help = "Delete ended runs older than N days, in bounded batches."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", help="only this workspace (its slug)")
        parser.add_argument("--days", type=int, help="age in days (default: WORKBENCH_RUN_RETENTION_DAYS)")
        parser.add_argument("--batch", type=int, default=PURGE_BATCH, help="events deleted per transaction")
        parser.add_argument("--dry-run", action="store_true", help="list what would be deleted")

    def handle(self, *args, **options) -> None:
        days = (
            getattr(settings, "WORKBENCH_RUN_RETENTION_DAYS", 0)
            if options["days"] is None
            else options["days"]
        )
        if days < 0 or options["batch"] < 1:
            raise CommandError("--days must be 0 (keep every run) or more, --batch 1 or more")
        if days == 0:
            self.stdout.write("retention is off (0 days): no run is deleted")
            return
        workspace = None
        if options["workspace"]:
            workspace = Workspace.objects.filter(slug=options["workspace"]).first()
            if workspace is None:
                raise CommandError(f"no workspace {options['workspace']!r}")
        before = timezone.now() - timedelta(days=days)
        if options["dry_run"]:
            found = old_runs(workspace, before)
            for owner, run_id in found:
                self.stdout.write(f"{owner.slug}: {run_id} would be deleted")
            self.stdout.write(f"{len(found)} run(s) ended before {before.isoformat()}")
            return
        report = do_prune_runs(before=before, workspace=workspace, batch=options["batch"])
        self.stdout.write(
            f"{report.runs} run(s), {report.events} event(s) deleted in {report.transactions} transaction(s);"
            f" the longest took {report.longest_transaction_ms:.0f} ms"
            + (f" ({report.longest_step})" if report.longest_step else "")
            + (
                "; each step's longest: " + ", ".join(f"{k} {v:.0f} ms" for k, v in report.step_ms.items())
                if report.step_ms
                else ""
            )
        )
