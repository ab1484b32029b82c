"""A middleware for the benches: the server's own time of a request, outermost in the stack
(every middleware, the view, its queries and the template render), in a ``Server-Timing`` header,
so a bench reads the server's time and not its client's. Only the benches put it in front of
settings.MIDDLEWARE; the app never does.

The header's parts (ms): ``app`` the wall time; ``cpu`` the Django thread's CPU time; ``db`` the
CPU time of its PostgreSQL backend process during the request; ``wait`` the time both spent
runnable but waiting for a core (the kernel's run-queue delay, /proc/<pid>/schedstat), which is
what a loaded machine adds and a quiet one does not: ``app - wait`` estimates the time on a quiet
machine. Parallel query workers are other processes: their CPU is in neither figure (the leader
waits for them in ``app``). Without /proc (not Linux) or on SQLite, ``db`` and ``wait`` are 0.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

from django.db import connection
from django.http import HttpRequest, HttpResponse

PATH = "server_timing.ServerTiming"
_DUR = re.compile(r"(\w+);dur=([\d.]+)")
_backends: dict[int, int] = {}  # id of the DB-API connection -> its backend's pid


def _schedstat(path: str) -> tuple[int, int]:
    """(ns on a core, ns waiting for one) of a thread or process; (0, 0) without /proc."""
    try:
        on_cpu, waiting, _ = Path(path).read_text().split()
    except (OSError, ValueError):
        return 0, 0
    return int(on_cpu), int(waiting)


def _backend_pid() -> int | None:
    """The PostgreSQL backend of this thread's connection (asked once per connection)."""
    if connection.vendor != "postgresql":
        return None
    connection.ensure_connection()
    key = id(connection.connection)
    if key not in _backends:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            _backends[key] = cursor.fetchone()[0]
    return _backends[key]


class ServerTiming:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        me = f"/proc/self/task/{threading.get_native_id()}/schedstat"
        backend = _backend_pid()
        theirs = f"/proc/{backend}/schedstat" if backend else ""
        db0, me0 = _schedstat(theirs), _schedstat(me)
        c0, t0 = time.thread_time(), time.perf_counter()
        response = self.get_response(request)
        wall = (time.perf_counter() - t0) * 1000
        cpu = (time.thread_time() - c0) * 1000
        me1, db1 = _schedstat(me), _schedstat(theirs)
        db = (db1[0] - db0[0]) / 1e6
        wait = ((me1[1] - me0[1]) + (db1[1] - db0[1])) / 1e6
        response["Server-Timing"] = (
            f"app;dur={wall:.3f}, cpu;dur={cpu:.3f}, db;dur={db:.3f}, wait;dur={wait:.3f}"
        )
        return response


def server_times(response: HttpResponse) -> dict[str, float]:
    """``{"app", "cpu", "db", "wait"}`` ms of a response that went through :class:`ServerTiming`."""
    return {name: float(ms) for name, ms in _DUR.findall(response["Server-Timing"])}
