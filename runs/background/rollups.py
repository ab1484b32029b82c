"""Rebuilding a workspace's rollups as a task (``runs.actions.rollups.rebuild``), one task row per
workspace, run by the workers: ``manage.py rebuild_rollups --background`` enqueues them.

Idempotent: a rebuild replaces the workspace's rollup rows by what its stored events say, in one
transaction; running it twice (a worker that died mid-task, its row run again) writes the same
rows. A workspace deleted before its row runs is skipped.
"""

from __future__ import annotations

from django.tasks import task

from runs.actions import rebuild_rollups
from runs.models import Workspace


@task()
def rebuild_rollups_task(workspace_pk: int) -> str:
    """Rebuild one workspace's rollups from its stored events."""
    workspace = Workspace.objects.filter(pk=workspace_pk).first()
    if workspace is None:
        return "gone"
    costs, runs = rebuild_rollups(workspace)
    return f"{workspace.slug}: rebuilt ({costs} cost rows, {runs} run counters)"


def enqueue_rebuild(workspace: Workspace) -> str:
    """A task row that rebuilds ``workspace``'s rollups; returns its id."""
    return str(rebuild_rollups_task.enqueue(workspace.pk).id)
