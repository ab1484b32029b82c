"""`manage.py worker [--threads 4] [--queues default,notifications]`: run background tasks.

The one worker command of every profile: imports, experiments, notification deliveries, the
periodic sweeps (outbox, quiet OTLP traces, retention, lost jobs) and whatever else is a
``django.tasks`` task, from django-tasks-db's task rows. Start any number, on any machine that
reaches the database; each runs ``--threads`` tasks at once. SIGTERM / Ctrl-C: no new task is
claimed, running ones get ``--grace`` seconds to finish, then go back to the queue; a second
signal puts them back at once. A worker killed outright loses its lease after
``WORKBENCH_WORKER_LEASE_SECONDS`` and its tasks run again on another worker.
"""

from __future__ import annotations

import logging
import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.background.worker import DEFAULT_QUEUES, Worker, run_until_idle


class Command(BaseCommand):
    help = "Run background tasks (django-tasks-db rows): any number of processes, --threads each."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--threads", type=int, default=4, help="tasks run at once (default 4)")
        parser.add_argument(
            "--queues", default=",".join(DEFAULT_QUEUES), help="comma-separated queues (default: %(default)s)"
        )
        parser.add_argument(
            "--interval", type=float, default=0.5, help="seconds between polls of an idle thread"
        )
        parser.add_argument("--grace", type=float, default=30.0, help="seconds running tasks get on SIGTERM")
        parser.add_argument(
            "--batch", action="store_true", help="run what is ready in this thread, then exit"
        )

    def handle(self, *args, **options) -> None:
        queues = [q.strip() for q in options["queues"].split(",") if q.strip()]
        if options["threads"] < 1 or not queues or options["interval"] < 0 or options["grace"] < 0:
            raise CommandError("--threads must be 1 or more, --queues non-empty, --interval and --grace >= 0")
        if settings.WORKBENCH_TASKS_BACKEND != "database":
            raise CommandError(
                f"the worker runs the database task backend; WORKBENCH_TASKS_BACKEND is "
                f"{settings.WORKBENCH_TASKS_BACKEND!r}"
            )
        if options["batch"]:
            ran = run_until_idle(queues=queues)
            self.stdout.write(f"{ran} task(s) run")
            return
        log = logging.getLogger("workbench.worker")
        if (
            not log.hasHandlers() and options["verbosity"] >= 1
        ):  # its own lines (the tasks' are Django's LOGGING)
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
            log.addHandler(handler)
            log.setLevel(logging.INFO)
        worker = Worker(
            queues=queues, threads=options["threads"], interval=options["interval"], grace=options["grace"]
        )
        self.stdout.write(
            f"worker {worker.worker_id}: {options['threads']} thread(s) on {','.join(queues)}", ending="\n"
        )
        self.stdout.flush()
        released = worker.serve()
        self.stdout.write(f"worker {worker.worker_id} stopped; {released} unfinished task(s) put back")
