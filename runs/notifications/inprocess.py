"""The embedded profile's ``django.tasks`` backend: tasks run on one thread of this process.

Nothing extra to start: ``make run``'s server delivers notifications itself. A task enqueued
inside a transaction is handed to the thread only after the commit (and dropped on rollback);
a deferred one (``run_after``) waits in a heap until then. Nothing here is durable, and nothing
needs to be: the outbox rows are, and the server enqueues one look at them when it starts
(``workbench/asgi.py``), so rows left by a crash are sent after the restart.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from functools import partial
from traceback import format_exception

from django.db import close_old_connections, transaction
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import TaskError, TaskResult, TaskResultStatus
from django.utils import timezone
from django.utils.crypto import get_random_string

log = logging.getLogger("workbench.tasks")


class _Runner:
    """One daemon thread running due tasks in order of their time (then of their arrival)."""

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, TaskResult]] = []
        self.counter = itertools.count()
        self.wake = threading.Condition()
        self.thread: threading.Thread | None = None
        self.worker_id = get_random_string(32)

    def submit(self, result: TaskResult) -> None:
        run_after = result.task.run_after
        when = run_after.timestamp() if run_after is not None else 0.0
        with self.wake:
            # the same task due at the same time once is enough (a burst of appends: one look)
            key = (result.task.module_path, when)
            if not any((r.task.module_path, w) == key for w, _, r in self.heap):
                heapq.heappush(self.heap, (when, next(self.counter), result))
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._loop, name="workbench-tasks", daemon=True)
                self.thread.start()
            self.wake.notify()

    def forget(self) -> None:
        """Drop what waits (a test's deferred looks must not run against the next test's data)."""
        with self.wake:
            self.heap.clear()

    def _loop(self) -> None:
        while True:
            with self.wake:
                while True:
                    now = timezone.now().timestamp()
                    if self.heap and self.heap[0][0] <= now:
                        _, _, result = heapq.heappop(self.heap)
                        break
                    self.wake.wait(timeout=(self.heap[0][0] - now) if self.heap else None)
            self._run(result)

    def _run(self, result: TaskResult) -> None:
        object.__setattr__(result, "status", TaskResultStatus.RUNNING)
        object.__setattr__(result, "started_at", timezone.now())
        result.worker_ids.append(self.worker_id)
        try:
            result.task.call(*result.args, **result.kwargs)
        except Exception as exc:
            log.exception("task %s failed", result.task.module_path)
            result.errors.append(
                TaskError(
                    exception_class_path=f"{type(exc).__module__}.{type(exc).__qualname__}",
                    traceback="".join(format_exception(exc)),
                )
            )
            object.__setattr__(result, "status", TaskResultStatus.FAILED)
        else:
            object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
        finally:
            object.__setattr__(result, "finished_at", timezone.now())
            close_old_connections()


_runner = _Runner()


class InProcessBackend(BaseTaskBackend):
    supports_defer = True

    def enqueue(self, task, args, kwargs):
        self.validate_task(task)
        result = TaskResult(
            task=task,
            id=get_random_string(32),
            status=TaskResultStatus.READY,
            enqueued_at=timezone.now(),
            started_at=None,
            last_attempted_at=None,
            finished_at=None,
            args=list(args),
            kwargs=dict(kwargs),
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        # after the commit (at once outside a transaction); a rollback drops it
        transaction.on_commit(partial(_runner.submit, result), robust=True)
        return result

    @staticmethod
    def forget_scheduled() -> None:
        _runner.forget()
