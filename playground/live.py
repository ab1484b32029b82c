"""Execution progress on the live path the runs use: after each commit that changes an execution
(claimed, partial answer saved, finished, stopped, recovered), a notification goes through
``runs.live.publisher.publisher`` (coalescing, never blocking the writer) to the channel layer group of the
execution; each process's ``RunHub`` for that group wakes its sockets, which read the row once.
With the Redis layer a worker in one process reaches the pages served by another.

Notifications carry only the execution's key and status; what is shown is read from the row.
"""

from __future__ import annotations

import uuid
from functools import partial

from django.db import transaction

from runs.actions.notify import RunChange
from runs.live.publisher import publisher

PREFIX = "pgexec."


def execution_key(execution_id: uuid.UUID | str) -> str:
    """The hub key (and, through ``runs.live.publisher.run_group``, the group) of one execution."""
    return f"{PREFIX}{uuid.UUID(str(execution_id)).hex}"


def notify_on_commit(execution_id: uuid.UUID | str, status: str = "") -> None:
    change = RunChange(
        workspace_id=None, run_id=execution_key(execution_id), first_seq=0, last_seq=0, status=status
    )
    transaction.on_commit(partial(publisher.submit, change))
