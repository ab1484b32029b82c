from __future__ import annotations

import pytest
from django.tasks import task_backends
from django.utils.module_loading import import_string

PATH = "django_tasks_db.DatabaseBackend"


@pytest.fixture
def db_tasks(settings):
    """django-tasks-db as the task backend (the suite's default records tasks without rows)."""
    settings.WORKBENCH_TASKS_BACKEND = "database"
    old = task_backends["default"]
    task_backends["default"] = import_string(PATH)(
        alias="default", params={"BACKEND": PATH, "QUEUES": ["default", "notifications"]}
    )
    try:
        yield task_backends["default"]
    finally:
        task_backends["default"] = old
