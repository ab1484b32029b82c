"""The sender runs through django.tasks: the task row of django-tasks-db commits (or rolls back)
with the outbox rows, and the worker (`manage.py worker`'s loop, run here in this thread) sends
them."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from django.core.management import call_command
from django.db import transaction
from django.utils.module_loading import import_string

from runs.models import Delivery
from tests.notifications.conftest import bring_review_gate, make_hook

TASK_PATH = "runs.notifications.tasks.deliver_notifications"


@contextmanager
def task_backend(path: str):
    from django.tasks import task_backends

    old = task_backends["default"]
    task_backends["default"] = import_string(path)(
        alias="default", params={"BACKEND": path, "QUEUES": ["default", "notifications"]}
    )
    try:
        yield task_backends["default"]
    finally:
        task_backends["default"] = old


@pytest.mark.django_db(transaction=True)
def test_database_backend_commits_the_task_with_the_outbox(workspace, started_run, receiver):
    from django_tasks_db.models import DBTaskResult

    with task_backend("django_tasks_db.DatabaseBackend"):
        make_hook(workspace, receiver.url)
        with transaction.atomic():
            bring_review_gate(workspace)
            assert DBTaskResult.objects.filter(task_path=TASK_PATH).count() == 1
            transaction.set_rollback(True)
        assert DBTaskResult.objects.count() == 0 and Delivery.objects.count() == 0
        bring_review_gate(workspace)
        assert DBTaskResult.objects.ready().filter(task_path=TASK_PATH).count() == 1
        call_command(
            "db_worker",
            queue_name="notifications",
            batch=True,
            reload=False,
            startup_delay=False,
            verbosity=0,
        )
    assert len(receiver.hits) == 1
    assert Delivery.objects.get().status == "delivered"
    # the claim scheduled a look at the end of its lease (what follows a worker killed mid-delivery)
    assert (
        DBTaskResult.objects.filter(task_path=TASK_PATH, status="READY").exclude(run_after__year=9999).count()
        == 1
    )


@pytest.mark.django_db(transaction=True)
def test_notify_worker_once(workspace, started_run, receiver):
    make_hook(workspace, receiver.url)
    bring_review_gate(workspace)
    call_command("notify_worker", once=True, verbosity=0)
    assert len(receiver.hits) == 1


@pytest.mark.django_db(transaction=True)
def test_the_worker_delivers_what_the_commit_enqueued(workspace, started_run, receiver):
    from runs.background.worker import run_until_idle

    with task_backend("django_tasks_db.DatabaseBackend"):
        make_hook(workspace, receiver.url)
        with transaction.atomic():
            bring_review_gate(workspace)
            transaction.set_rollback(True)  # rolled back: no task row, nothing to send
        assert run_until_idle() == 0 and receiver.hits == []
        bring_review_gate(workspace)
        assert run_until_idle() >= 1
    hits = receiver.wait_for(1, timeout=5)
    assert len(hits) == 1 and hits[0].json["type"] == "gate.requested"
