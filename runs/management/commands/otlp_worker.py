"""Store the spans queued by ``POST /v1/traces`` (``WORKBENCH_OTLP_QUEUE``; see runs/actions/otlp_queue.py).

manage.py otlp_worker              # until stopped (SIGTERM/SIGINT)
manage.py otlp_worker --once       # what is queued now, then exit
manage.py otlp_worker --status     # what waits in the spool (bodies, spans, failed), and the rate

Any number of workers may share the spool (``WORKBENCH_OTLP_SPOOL_DIR``). The embedded profile's
server starts its own with ``--parent <its pid>`` (the worker ends with it) and, when its channel
layer is in memory, ``--forward-changes`` (committed changes go to the server on standard output).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading

from django.core.management.base import BaseCommand

from runs.actions.notify import replace_listeners
from runs.actions.otlp_queue import Spool
from runs.telemetry.otlp_worker import forward_changes as forwarder
from runs.telemetry.otlp_worker import prepare_process, run


class Command(BaseCommand):
    help = "Store the OTLP spans queued by the receivers (WORKBENCH_OTLP_QUEUE)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--once", action="store_true", help="store what is queued now, then exit")
        parser.add_argument("--status", action="store_true", help="print what waits in the spool, then exit")
        parser.add_argument("--parent", type=int, default=None, help="exit when this process is gone")
        parser.add_argument("--forward-changes", action="store_true", help="committed changes to stdout")
        parser.add_argument(
            "--journal", default=None, help="append a line per stored body (name, spans, time)"
        )

    def handle(self, *args, once: bool = False, parent: int | None = None, **options) -> None:
        journal = options.get("journal")
        if options.get("status"):
            self.stdout.write(json.dumps(Spool().status()))
            return
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        if options.get("forward_changes"):
            out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
            os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # nothing else may write on the channel
            replace_listeners(forwarder(out))
        prepare_process()
        with open(journal, "a") if journal else contextlib.nullcontext() as journal_file:
            stored = run(stop=stop, parent=parent, once=once, journal=journal_file)
        if once:
            self.stderr.write(f"stored {stored} queued bodies")
