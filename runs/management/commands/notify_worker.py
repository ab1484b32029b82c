"""`manage.py notify_worker [--once]`: send notification deliveries (webhooks, Slack, e-mail).

Without ``--once`` this is django-tasks-db's own worker (``manage.py db_worker``) on the
``notifications`` queue: run as many as you like (scaled profile, WORKBENCH_TASKS_BACKEND=database);
rows are claimed with ``SELECT ... FOR UPDATE SKIP LOCKED``, so no two send the same delivery.
It first enqueues one look at the outbox, so deliveries whose task was lost are sent too.

``--once`` sends what is due now and exits, whatever the task backend (cron, tests, scripts).
The embedded profile needs neither: the server process delivers.
"""

from __future__ import annotations

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.notifications.delivery import deliver_due
from runs.notifications.tasks import QUEUE, schedule


class Command(BaseCommand):
    help = "Send due notification deliveries (webhooks, Slack, e-mail); --once sends what is due and exits."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="send what is due now, then exit")
        parser.add_argument("--interval", type=float, default=0.5, help="seconds between polls when idle")

    def handle(self, *args, **options) -> None:
        if options["once"]:
            sent = deliver_due()
            self.stdout.write(f"{sent} delivery attempt(s) made")
            return
        if settings.WORKBENCH_TASKS_BACKEND != "database":
            raise CommandError(
                "notify_worker serves the database task backend (WORKBENCH_TASKS_BACKEND=database); "
                f"this process has {settings.WORKBENCH_TASKS_BACKEND!r} (use --once, or let the server deliver)"
            )
        schedule()
        call_command(
            "db_worker",
            queue_name=QUEUE,
            interval=options["interval"],
            reload=False,
            startup_delay=False,
            verbosity=options["verbosity"],
        )
