"""One watch for a provider call that another process may stop.

A fork's program (a Cancel on its run) and a playground execution (a Stop on its row) both run a
provider call that someone can end from another process, where nothing can reach the call's thread
but the database. While the call runs, a thread of its own looks every ``every`` seconds, on a
connection of its own, and sets the call's :class:`~runs.providers.Stop` the first time ``stopped``
says yes: the SDK's connection is shut at once, even while it waits for a first byte.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.db import DatabaseError, close_old_connections, connection

from runs.providers import Stop

log = logging.getLogger(__name__)


class StopWatch:
    def __init__(self, stopped: Callable[[], bool], stop: Stop, *, every: float, name: str) -> None:
        self.stopped = stopped
        self.stop = stop
        self.every = every
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def __enter__(self) -> StopWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()

    def _loop(self) -> None:
        try:
            while not self.done.wait(self.every):
                try:
                    stopped = self.stopped()
                except DatabaseError as exc:  # a busy database only delays the next look
                    log.info("stop watch %s: %s", self.thread.name, exc)
                    continue
                if stopped:
                    self.stop.set()
                    return
        finally:
            close_old_connections()
            connection.close()
