"""A prompt, polite shutdown under daphne: SIGTERM ends the process within seconds.

Before, a transcript follow stream (``transcript.jsonl?follow=true``) kept daphne alive for more
than ten seconds after SIGTERM and was cut mid-stream. :func:`install_daphne_graceful_shutdown`
(called by workbench/asgi.py) runs first when daphne's reactor shuts down:

1. every follow stream of the process is told to end (``transcript_log.close_followers``): each
   ends cleanly at its next poll (a quarter second), and the follower reconnects with
   ``after_seq`` to another process or after the restart;
2. every websocket is closed with code 1001 "going away" (browsers reconnect and resync);
3. daphne's own shutdown follows once the follow streams have ended, or after
   :data:`GRACE_SECONDS` at most: daphne cancels what is left;
4. when the reactor has stopped, the process flushes what must not be lost (the OTLP exporter's
   last batch, the logs), closes its database connections and exits at once. The interpreter's
   own teardown of this process (the SDKs, Django, Twisted: many objects) took ten seconds on a
   busy machine after the server had already stopped; nothing in it needs to run. A playground
   call still in flight is abandoned like after a crash: its execution is marked interrupted by
   the stale-heartbeat sweep.

The whole takes well under 5 s.
"""

from __future__ import annotations

import logging
import os
import sys
import time

from runs.telemetry import otel_stream, transcript_log

log = logging.getLogger(__name__)

GRACE_SECONDS = 2.0
GOING_AWAY = 1001


def install_daphne_graceful_shutdown() -> bool:
    """Patch daphne's server shutdown (see the module docstring); False when daphne is absent."""
    try:
        from daphne.server import Server
        from daphne.ws_protocol import WebSocketProtocol
        from twisted.internet import defer, task
    except ImportError:
        return False
    if getattr(Server, "_workbench_graceful", False):
        return True
    kill_all_applications = Server.kill_all_applications

    def graceful_kill_all_applications(self):
        from twisted.internet import reactor  # the reactor daphne runs (installed at its start)

        transcript_log.close_followers()
        closed = 0
        for protocol in list(getattr(self, "connections", {})):
            if isinstance(protocol, WebSocketProtocol):
                try:
                    # The server's own code: autobahn's public sendClose() accepts only 1000 and
                    # 3000-4999 (application codes); 1001 goes out through the frame method it uses.
                    protocol.sendCloseFrame(code=GOING_AWAY, reasonUtf8=b"server shutting down")
                    closed += 1
                except Exception:  # a socket already closing: nothing to tell it
                    log.debug("websocket close on shutdown failed", exc_info=True)
        log.info("shutdown: %d websocket(s) closed (1001), %d follow stream(s) ending",
                 closed, transcript_log.active_followers())  # fmt: skip
        deadline = time.monotonic() + GRACE_SECONDS

        def wait_for_followers():
            if transcript_log.active_followers() and time.monotonic() < deadline:
                return task.deferLater(reactor, 0.05, wait_for_followers)
            return defer.maybeDeferred(kill_all_applications, self)

        reactor.addSystemEventTrigger("after", "shutdown", exit_now)
        return wait_for_followers()

    Server.kill_all_applications = graceful_kill_all_applications
    Server._workbench_graceful = True
    return True


def exit_now(code: int = 0) -> None:
    """After daphne's reactor stopped: flush, close, and leave without the interpreter's teardown."""
    from django.db import connections  # Django is set up by now: the ASGI application imported it

    try:
        otel_stream.stop()  # the continuous OTLP exporter's last batch
        connections.close_all()
    except Exception:  # still leave: the server has stopped
        log.exception("shutdown: flushing failed")
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
