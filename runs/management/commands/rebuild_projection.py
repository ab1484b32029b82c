"""`manage.py rebuild_projection [RUN_ID ...] [--check]`: recompute run projections from their events."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandParser

from runs.actions import projection_matches_fold, rebuild_projection
from runs.models import Run


class Command(BaseCommand):
    help = "Rebuild (or with --check, only compare) run projections by folding their stored events."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_ids", nargs="*", help="runs to rebuild (default: all)")
        parser.add_argument("--check", action="store_true", help="report mismatches, change nothing")

    def handle(self, *args, **options) -> None:
        qs = Run.unscoped.all()
        if options["run_ids"]:
            qs = qs.filter(run_id__in=options["run_ids"])
        mismatched = 0
        for run in qs.iterator():
            if options["check"]:
                if not projection_matches_fold(run):
                    mismatched += 1
                    self.stdout.write(f"{run.workspace.slug}/{run.run_id}: projection differs from fold")
            else:
                rebuild_projection(run)
                self.stdout.write(f"{run.workspace.slug}/{run.run_id}: rebuilt ({run.last_seq} events)")
        if mismatched:
            sys.exit(1)
