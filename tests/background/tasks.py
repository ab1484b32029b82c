"""Tasks the worker tests enqueue (importable by path, as every task must be)."""

from __future__ import annotations

import time

from django.tasks import task

from runs.models import Workspace


@task()
def touch(slug: str) -> str:
    """Create the workspace ``slug`` (idempotent: get_or_create); the test sees that it ran."""
    Workspace.objects.get_or_create(slug=slug, defaults={"name": slug})
    return slug


@task()
def sleep_then_touch(seconds: float, slug: str) -> str:
    time.sleep(seconds)
    Workspace.objects.get_or_create(slug=slug, defaults={"name": slug})
    return slug
