"""`manage.py prune_replay_data [--workspace SLUG] [--days N] [--dry-run]`: delete expired cached
model responses (the replay cache), workspace by workspace.

An answer expires ``WORKBENCH_REPLAY_CACHE_DAYS`` days (``--days`` overrides) after it was
recorded or last used by a replay. Expired answers already no longer answer replays; this
reclaims their rows. It also removes the live transcripts (var/transcripts/) of runs that no
longer exist (a deleted workspace, a write that raced a deletion). The task workers' retention
pass does the same hourly.
"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.actions import responsecache
from runs.models import Workspace
from runs.telemetry import transcript_log


class Command(BaseCommand):
    help = "Delete expired cached model responses (replay data), per workspace."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", help="only this workspace (its slug)")
        parser.add_argument(
            "--days", type=int, help="expiry in days (default: the WORKBENCH_REPLAY_CACHE_DAYS setting)"
        )
        parser.add_argument("--dry-run", action="store_true", help="count what would be deleted")

    def handle(self, *args, **options) -> None:
        days = settings.WORKBENCH_REPLAY_CACHE_DAYS if options["days"] is None else options["days"]
        if days < 0:
            raise CommandError("--days must be 0 (never expire) or more")
        workspace = None
        if options["workspace"]:
            workspace = Workspace.objects.filter(slug=options["workspace"]).first()
            if workspace is None:
                raise CommandError(f"no workspace {options['workspace']!r}")
        if not options["dry_run"]:
            removed = transcript_log.sweep_orphans()
            self.stdout.write(f"{removed} transcript file(s) of deleted runs removed")
        boundary = responsecache.retention_boundary(days=days)
        if boundary is None:
            self.stdout.write("retention is off (0 days): nothing expires")
            return
        if options["dry_run"]:
            counts, verb = responsecache.expired_counts(boundary, workspace=workspace), "would be deleted"
        else:
            counts, verb = responsecache.prune(workspace=workspace, days=days), "deleted"
        for slug, count in sorted(counts.items()):
            self.stdout.write(f"{slug}: {count} expired cached response(s) {verb}")
        self.stdout.write(f"{sum(counts.values())} in all (recorded and unused since {boundary.isoformat()})")
