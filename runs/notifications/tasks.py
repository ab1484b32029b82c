"""The background task that sends notifications, through Django's tasks framework.

``deliver_notifications`` is a ``django.tasks`` task on the ``notifications`` queue. The write
path schedules it (``runs.actions.notify.schedule_deliveries``, registered in
``RunsConfig.ready``) inside the transaction that wrote outbox rows, and again, deferred, for
each retry and for the end of each lease (so a worker killed mid-delivery is followed by a
task that finds the row due again). Which backend runs it is a setting
(``WORKBENCH_TASKS_BACKEND``): a thread of the server process in the embedded profile,
django-tasks-db's task rows and workers in the scaled one. The outbox rows, not the task rows,
are the record of what must be sent: a task that is lost or runs twice loses or doubles nothing.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.tasks import task

from runs.notifications.delivery import deliver_due

log = logging.getLogger("workbench.notify")

QUEUE = "notifications"


@task(queue_name=QUEUE)
def deliver_notifications() -> int:
    """Send every delivery that is due; returns the number of attempts made."""
    return deliver_due()


def schedule(run_after: datetime | None = None) -> None:
    """Enqueue the task (now, or not before ``run_after``). Never fails the caller's write."""
    job = deliver_notifications if run_after is None else deliver_notifications.using(run_after=run_after)
    try:
        job.enqueue()
    except Exception:  # the outbox row is committed either way; the next look finds it
        log.exception("could not enqueue the notification task")
