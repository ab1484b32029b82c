"""`manage.py notify_worker --once`: send the notification deliveries due now, then exit (cron,
tests, scripts). Deliveries are otherwise tasks like any other: `manage.py worker` runs them.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.notifications.delivery import deliver_due


class Command(BaseCommand):
    help = "Send due notification deliveries (webhooks, Slack, e-mail) now, then exit (--once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="send what is due now, then exit")

    def handle(self, *args, **options) -> None:
        if not options["once"]:
            raise CommandError(
                "deliveries are background tasks: run `manage.py worker` (all queues) or "
                "`manage.py worker --queues notifications`; --once sends what is due and exits"
            )
        sent = deliver_due()
        self.stdout.write(f"{sent} delivery attempt(s) made")
