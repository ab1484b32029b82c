"""The quiet-period check in the server process (embedded profile): every few seconds, end the
runs created from OTLP whose trace went quiet (``runs.actions.otlp.do_end_quiet_traces``).

Started by the first OTLP request a process serves (``WORKBENCH_OTLP_SWEEP_INPROCESS``, on by
default in the embedded profile); the scaled profile runs ``manage.py otlp_sweep --loop`` instead.
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import close_old_connections

from runs.actions.otlp import do_end_quiet_traces
from runs.telemetry.otlp_worker import resume_queue

log = logging.getLogger(__name__)
_lock = threading.Lock()
_thread: threading.Thread | None = None
_stop = threading.Event()


def interval() -> float:
    """How often to look: a third of the quiet period, between 0.2 s and 10 s."""
    return min(10.0, max(0.2, settings.WORKBENCH_OTLP_QUIET_SECONDS / 3))


def sweep_once() -> None:
    try:
        report = do_end_quiet_traces()
        if report.completed or report.failed:
            log.info("otlp: ended %d quiet trace run(s)", len(report.completed) + len(report.failed))
    except Exception:  # a database hiccup must not end the loop
        log.exception("otlp: the quiet-period sweep failed")
    finally:
        close_old_connections()


def _loop() -> None:
    while not _stop.wait(interval()):
        sweep_once()
        try:
            resume_queue()  # the queue's worker died and spans wait: start another
        except Exception:
            log.exception("otlp: could not start the queue's worker")


def ensure_started() -> None:
    """Start the periodic check once per process, when the settings ask for it."""
    global _thread
    if not settings.WORKBENCH_OTLP_SWEEP_INPROCESS or (_thread is not None and _thread.is_alive()):
        return
    with _lock:
        if _thread is None or not _thread.is_alive():
            _stop.clear()
            _thread = threading.Thread(target=_loop, name="otlp-quiet-sweep", daemon=True)
            _thread.start()


def stop() -> None:
    """Stop the check (tests)."""
    global _thread
    _stop.set()
    if _thread is not None:
        _thread.join(timeout=5)
    _thread = None
