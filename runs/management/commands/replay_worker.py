"""`manage.py replay_worker [--once]`: re-execute pending forks (WORKBENCH_REPLAY_EXECUTOR=worker).

Forks are claimed with a conditional update, so several workers never run the same one. The
step code comes from the modules in ``WORKBENCH_PROGRAM_MODULES``, imported at start. When it
starts and hourly it prunes expired replay data and the transcripts of deleted runs.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandParser

from runs.engine import programs
from runs.execution.replay import work
from runs.telemetry import transcript_log


class Command(BaseCommand):
    help = "Re-execute pending replay and branch forks with the registered step code."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="run what is pending, then exit")
        parser.add_argument("--poll", type=float, default=1.0, help="seconds between polls when idle")

    def handle(self, *args, **options) -> None:
        programs.load_configured()
        # The hourly retention pass also removes the transcripts of runs that are gone.
        ran = work(once=options["once"], poll=options["poll"], retention=transcript_log.sweep_orphans)
        if options["once"]:
            self.stdout.write(f"{ran} fork(s) re-executed")
