"""Swap the ``django.tasks`` backend for one test: the suite's own is the dummy backend (tasks are
recorded, never run behind a test's back). ``immediate`` runs a task when it is enqueued, which for
the tasks enqueued after a commit is what an idle worker does right away."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.utils.module_loading import import_string

IMMEDIATE = "django.tasks.backends.immediate.ImmediateBackend"
DUMMY = "django.tasks.backends.dummy.DummyBackend"
DATABASE = "django_tasks_db.DatabaseBackend"


@contextmanager
def task_backend(path: str) -> Iterator[object]:
    from django.tasks import task_backends

    old = task_backends["default"]
    task_backends["default"] = import_string(path)(
        alias="default", params={"BACKEND": path, "QUEUES": ["default", "notifications"]}
    )
    try:
        yield task_backends["default"]
    finally:
        task_backends["default"] = old
