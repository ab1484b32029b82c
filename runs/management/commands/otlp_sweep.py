"""End the runs created from OTLP whose root span has ended and whose trace went quiet.

manage.py otlp_sweep                 # once
manage.py otlp_sweep --loop          # every few seconds until stopped (the scaled profile)
manage.py otlp_sweep --quiet-seconds 5
"""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand

from runs.actions.otlp import do_end_quiet_traces
from runs.telemetry.otlp_sweep import interval


class Command(BaseCommand):
    help = "End the OTLP trace runs whose root span ended and that received no span for the quiet period."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--quiet-seconds", type=float, default=None)
        parser.add_argument("--loop", action="store_true")

    def handle(self, *args, quiet_seconds: float | None = None, loop: bool = False, **options) -> None:
        while True:
            report = do_end_quiet_traces(quiet_seconds=quiet_seconds)
            for run_id in report.completed:
                self.stdout.write(f"completed {run_id}")
            for run_id in report.failed:
                self.stdout.write(f"failed {run_id}")
            if not loop:
                return
            time.sleep(interval())
