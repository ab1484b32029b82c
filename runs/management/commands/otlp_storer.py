"""Store the OTLP batches the receivers put in the Redis Stream (``WORKBENCH_OTLP_BUFFER=redis``, the
scaled profile; see runs/actions/otlp_streams.py and runs/telemetry/otlp_storer.py).

manage.py otlp_storer              # until stopped (SIGTERM/SIGINT: the batch in hand is finished)
manage.py otlp_storer --once       # what is in the stream now (and what dead storers left), then exit
manage.py otlp_storer --status     # the backlog, what each storer holds, the failed entries

(``workbench otlp-storer`` for an installed wheel.) Any number, on any machine reaching Redis and
the database.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.actions.otlp_streams import StreamBuffer
from runs.telemetry.otlp_storer import consumer_name, run
from runs.telemetry.otlp_worker import prepare_process


class Command(BaseCommand):
    help = "Store the OTLP batches queued in the Redis Stream (WORKBENCH_OTLP_BUFFER=redis)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="store what is in the stream now, then exit")
        parser.add_argument("--status", action="store_true", help="print the stream's backlog, then exit")
        parser.add_argument("--consumer", default=None, help="this storer's name in the group (host-pid)")
        parser.add_argument(
            "--journal", default=None, help="append a line per stored entry (id, spans, time)"
        )

    def handle(self, *args, **options) -> None:
        if not settings.REDIS_URL:
            raise CommandError("the OTLP storer reads the Redis Stream: set REDIS_URL")
        buffer = StreamBuffer()
        if options["status"]:
            self.stdout.write(json.dumps(buffer.status()))
            return
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        prepare_process()
        consumer = options["consumer"] or consumer_name()
        self.stdout.write(f"otlp storer {consumer}: stream {buffer.key}, group storers")
        self.stdout.flush()
        journal = options["journal"]
        with open(journal, "a") if journal else contextlib.nullcontext() as journal_file:
            stored = run(
                buffer=buffer, consumer=consumer, stop=stop, once=options["once"], journal=journal_file
            )
        self.stdout.write(f"otlp storer {consumer}: stored {stored} batch(es)")
