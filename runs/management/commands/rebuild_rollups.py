"""`manage.py rebuild_rollups [--workspace SLUG ...] [--check] [--background]`: recompute the cost
and run rollups (what the workspace ledger reads) from the stored events; with ``--background``,
one task per workspace for the workers (runs.background.rollups) instead of here."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandParser

from runs.actions import rebuild_rollups, rollups_match
from runs.background.rollups import enqueue_rebuild
from runs.models import Workspace


class Command(BaseCommand):
    help = "Rebuild (or with --check, only compare) the workspace rollups from the stored events."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--workspace", action="append", default=[], help="a workspace slug (default: all)"
        )
        parser.add_argument("--check", action="store_true", help="report mismatches, change nothing")
        parser.add_argument(
            "--background", action="store_true", help="enqueue one task per workspace for the workers"
        )

    def handle(self, *args, **options) -> None:
        workspaces = Workspace.objects.order_by("slug")
        if options["workspace"]:
            workspaces = workspaces.filter(slug__in=options["workspace"])
        mismatched = 0
        for workspace in workspaces:
            if options["check"]:
                if not rollups_match(workspace):
                    mismatched += 1
                    self.stdout.write(f"{workspace.slug}: rollups differ from the events")
                continue
            if options["background"]:
                self.stdout.write(f"{workspace.slug}: queued (task {enqueue_rebuild(workspace)})")
                continue
            costs, runs = rebuild_rollups(workspace)
            self.stdout.write(f"{workspace.slug}: rebuilt ({costs} cost rows, {runs} run counters)")
        if mismatched:
            sys.exit(1)
