"""Process playground executions outside the web processes (scaled profile).

    manage.py playground_worker [--concurrency 4] [--poll 0.5] [--once]

Several workers may run on several machines: an execution is claimed by a conditional update, so
only one worker calls the provider. Each worker beats for the executions it holds; executions of
a worker that stopped beating are failed with EXECUTION_INTERRUPTED (never left processing).
"""

from __future__ import annotations

import signal
import time

from django.core.management.base import BaseCommand
from django.db import close_old_connections

from playground.execute import Runner, recover_stale


class Command(BaseCommand):
    help = "Run playground executions (pending -> processing -> completed/failed)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--concurrency", type=int, default=4)
        parser.add_argument("--poll", type=float, default=0.5, help="seconds between looks for pending work")
        parser.add_argument("--once", action="store_true", help="process what is pending now, then exit")

    def handle(self, *args, **opts) -> None:
        runner = Runner(workers=max(1, opts["concurrency"]), prefix="worker")
        stop = {"now": False}

        def _stop(signum, frame) -> None:
            stop["now"] = True

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
        recovered = recover_stale()
        if recovered:
            self.stdout.write(f"failed {len(recovered)} interrupted execution(s)")
        self.stdout.write(f"playground worker {runner.worker_id} started")
        try:
            while not stop["now"]:
                close_old_connections()
                runner.pick_up_pending()
                if opts["once"]:
                    break
                time.sleep(opts["poll"])
        finally:
            runner.shutdown(wait=True)
        self.stdout.write("playground worker stopped")
