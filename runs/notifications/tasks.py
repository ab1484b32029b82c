"""The background task that sends notifications, through Django's tasks framework.

``deliver_notifications`` is a ``django.tasks`` task on the ``notifications`` queue. The write
path schedules it (``runs.actions.notify.schedule_deliveries``, registered in
``RunsConfig.ready``) inside the transaction that wrote outbox rows, and again, deferred, for
each retry and for the end of each lease (so a worker killed mid-delivery is followed by a
task that finds the row due again). Which backend runs it is a setting
(``WORKBENCH_TASKS_BACKEND``): a thread of the server process in the embedded profile,
django-tasks-db's task rows and workers in the scaled one. The outbox rows, not the task rows,
are the record of what must be sent: a task that is lost or runs twice loses or doubles nothing.

Idempotent: a run claims due rows under a lease (``claim_due``) and sends each with its fixed
``webhook-id``; two runs at once never take the same row, and a run killed mid-delivery leaves
its rows due again when their lease ends (receivers dedupe on the id). Inside one run attempts
go out concurrently, within the per-hook and per-host limits and each hook's circuit breaker
(``runs.notifications.delivery``).
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.tasks import task

from runs.notifications.delivery import deliver_due, wake

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
    if run_after is None:  # a sender of this process busy with slow receivers looks at once
        transaction.on_commit(wake)
