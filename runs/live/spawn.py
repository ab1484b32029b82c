"""Coroutines of the live path that run beside the code that starts them: kept, and their failures logged.

The event loop keeps only weak references to tasks, so a task nobody holds may be collected
before it finishes (asyncio's documentation of ``create_task``), and what a task nobody awaits
raises surfaces only as "Task exception was never retrieved" when it is collected, if ever.
:func:`spawn` holds the task in its owner's set until it is done, then logs what it raised
(a cancellation is the owner's own doing and is not logged).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from functools import partial
from typing import Any

log = logging.getLogger(__name__)

Tasks = set[asyncio.Task[Any]]


def spawn(tasks: Tasks, coro: Coroutine[Any, Any, Any], *, what: str) -> asyncio.Task[Any]:
    """Run ``coro`` as a task held in ``tasks`` until it ends; ``what`` names it in the log."""
    task = asyncio.get_running_loop().create_task(coro)
    tasks.add(task)
    task.add_done_callback(partial(_finished, tasks, what))
    return task


def _finished(tasks: Tasks, what: str, task: asyncio.Task[Any]) -> None:
    tasks.discard(task)
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        log.error("live: %s failed", what, exc_info=error)


async def cancel_all(tasks: Tasks) -> None:
    """Cancel the owner's tasks (but the caller's own) and wait until they have ended."""
    pending = [task for task in tasks if task is not asyncio.current_task()]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
