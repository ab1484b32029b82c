"""The live path's publishing half: committed run changes -> channel layer groups.

`runs.actions.notify` calls `on_run_change` after each commit (registered in `RunsConfig.ready`). The
listener never talks to the channel layer itself: it merges the change into a pending table (one
entry per run, seq ranges widened) and returns, so a writer is never slowed by broadcasting. A
drain task sends what is pending to `run.<id>` and `workspace.<id>`, then waits `LIVE_COALESCE_SECONDS`
before the next round: a burst of appends becomes one message per run per window.

Messages carry ids and seq ranges only (`{"type": "run.changed", "run_id", "workspace_id",
"first_seq", "last_seq", "status"}`); consumers read what they render from the event store, so a
lost or merged notification loses nothing as long as a later one arrives.

The drain runs in the event loop that serves websockets when this process has one (consumers
`attach_loop` on connect: the in-memory layer only delivers within its loop), otherwise in a small
daemon thread with its own loop (a writer-only process such as a management command, which then
flushes at exit).
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from functools import partial

from django.conf import settings

from runs.actions.notify import RunChange
from runs.live.spawn import Tasks, spawn
from runs.models import Membership

log = logging.getLogger(__name__)
# Broadcasts sent at once by one drain (each is one or two group sends); see LivePublisher._drain.
BROADCASTS_IN_FLIGHT = 16


_GROUP_SAFE = re.compile(r"[A-Za-z0-9_.\-]{1,80}")


def run_group(key: int | str) -> str:
    """A run's group is named after its row's surrogate key (protocol run ids are unique only
    within a workspace, and may hold any character); other hubs (a playground execution) pass a
    string key, hashed when it holds characters group names do not allow."""
    if isinstance(key, int):
        return f"run.{key}"
    if _GROUP_SAFE.fullmatch(key):
        return f"run.{key}"
    return "run.h" + hashlib.sha256(key.encode()).hexdigest()[:40]


def workspace_group(workspace_id: int) -> str:
    return f"workspace.{int(workspace_id)}"


def access_group(workspace_id: int) -> str:
    """Told when who may see a workspace changes (membership removed, role changed, user
    deactivated): open sockets of that workspace re-check their user at once."""
    return f"access.{int(workspace_id)}"


def coalesce_seconds() -> float:
    return float(getattr(settings, "LIVE_COALESCE_SECONDS", 0.03))


# --------------------------------------------------------------------------------------------
# Counters


@dataclass
class LiveMetrics:
    """Process-local counters of the live path (exposed at /live/metrics)."""

    changes: int = 0  # commits reported by runs.actions.notify
    broadcasts: int = 0  # run.changed messages sent (per run, after coalescing)
    coalesced: int = 0  # commits merged into another commit's broadcast
    publish_errors: int = 0
    layer_errors: int = 0  # a run hub lost its channel-layer subscription and rejoined
    connections: int = 0  # websocket connections accepted
    refused: int = 0  # connections refused (anonymous, outsider, unknown run)
    open: int = 0  # connections open now
    renders: int = 0  # updates rendered (shared by every subscriber at the same seq range and role)
    batch_reads: int = 0  # a run hub read a committed batch (once per process, however many pages)
    catchup_reads: int = 0  # reads for pages not in step (reconnect from an older seq, resync, lag)
    read_errors: int = 0  # a hub's read failed (its pages were told to resync)
    updates_sent: int = 0  # update messages pushed to subscribers
    shared_sends: int = 0  # of which the text was composed once for every page in step (fanout)
    prepared_sends: int = 0  # of which sent as one pre-framed websocket frame (daphne)
    hub_broadcasts: int = 0  # a run hub sent a new segment itself to the pages in step (one loop)
    broadcast_sends: int = 0  # updates sent that way (per broadcast: broadcast_sends / hub_broadcasts)
    sender_wakeups: int = 0  # a page's own sender woke to send (pages out of step, forms, catch-ups)
    frame_acks: int = 0  # acks taken where daphne receives the frame (not as ASGI messages)
    direct_writes: int = 0  # prepared frames sent at once with one send(2) (runs.live.transport)
    buffered_writes: int = 0  # prepared frames (partly) left to Twisted's buffered write path
    hub_merges: int = 0  # notifications a run hub merged into another's read (spacing, a delivery under way)
    drain_waits: int = 0  # deliveries that waited for their frames to leave daphne's buffers
    lagged_deliveries: int = 0  # deliveries whose loop turn after the broadcast took > LIVE_LAG_SECONDS
    rows_sent: int = 0  # timeline rows inside those updates
    drops: int = 0  # slow subscribers disconnected and told to resync
    revoked: int = 0  # sockets closed because their user lost access while connected
    resyncs: int = 0  # catch-ups from an older seq (reconnect with a gap, or a client's resync request)
    gaps: int = 0  # notifications whose first seq skipped past what a subscriber was known to have
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, name: str, amount: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + amount)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def reset(self) -> None:
        with self._lock:
            for name in list(vars(self)):
                if not name.startswith("_"):
                    setattr(self, name, 0)


metrics = LiveMetrics()


# --------------------------------------------------------------------------------------------
# Publisher


class LivePublisher:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[int | str | tuple[str, int], dict] = {}
        self._draining = False
        self._serving_loop: asyncio.AbstractEventLoop | None = None
        self._own_loop: asyncio.AbstractEventLoop | None = None
        self._idle = threading.Event()
        self._idle.set()
        self._progress = time.monotonic()
        self._drain_loop: asyncio.AbstractEventLoop | None = None
        self._drains: Tasks = set()  # the drain tasks, held until they end (the loop holds them weakly)

    # -- where the drain runs
    def attach_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Called by consumers: broadcasts of this process go out from the loop serving websockets."""
        self._serving_loop = loop

    def _target_loop(self) -> asyncio.AbstractEventLoop:
        loop = self._serving_loop
        if loop is not None and loop.is_running() and not loop.is_closed():
            return loop
        with self._lock:
            if self._own_loop is None or self._own_loop.is_closed():
                self._own_loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=self._own_loop.run_forever, name="live-publisher", daemon=True
                )
                thread.start()
                atexit.register(self.flush, 3.0)
            return self._own_loop

    def submit_access_change(self, workspace_id: int) -> None:
        """After a committed membership change: open sockets of the workspace re-check access."""
        message = {"type": "access.changed", "workspace_id": int(workspace_id)}
        with self._lock:
            self._pending[("access", int(workspace_id))] = message
        self._kick()

    # -- the listener
    def submit(self, change: RunChange) -> None:
        """O(1), never blocks on the channel layer: merge into the pending table."""
        metrics.add("changes")
        message = {
            "type": "run.changed",
            "run_id": change.run_id,
            "run_pk": change.run_pk,
            "workspace_id": change.workspace_id,
            "first_seq": change.first_seq,
            "last_seq": change.last_seq,
            "status": change.status,
        }
        with self._lock:
            key = change.run_pk or change.run_id
            current = self._pending.get(key)
            if current is None:
                self._pending[key] = message
            else:
                metrics.add("coalesced")
                if change.first_seq and (not current["first_seq"] or change.first_seq < current["first_seq"]):
                    current["first_seq"] = change.first_seq
                current["last_seq"] = max(current["last_seq"], change.last_seq)
                current["status"] = change.status
        # A drain scheduled on a loop that stopped before running it would never finish: restart.
        self._kick()

    def _kick(self) -> None:
        with self._lock:
            drain_loop = self._drain_loop
            stalled = self._draining and (
                drain_loop is None
                or drain_loop.is_closed()
                or not drain_loop.is_running()
                or time.monotonic() - self._progress > 1.0
            )
            start = not self._draining or stalled
            if start:
                self._progress = time.monotonic()
                self._draining = True
                self._idle.clear()
        if start:
            loop = self._target_loop()
            try:
                loop.call_soon_threadsafe(self._start_drain, loop)
            except RuntimeError:  # the loop closed between the check and the call
                self._serving_loop = None
                loop = self._target_loop()
                loop.call_soon_threadsafe(self._start_drain, loop)
            self._drain_loop = loop

    def _start_drain(self, loop: asyncio.AbstractEventLoop) -> None:
        """In ``loop`` (call_soon_threadsafe): the drain, held in ``_drains`` and its failure logged."""
        spawn(self._drains, self._drain(), what="the live publisher's drain")

    async def _drain(self) -> None:
        from channels.layers import get_channel_layer

        current = asyncio.get_running_loop()
        try:
            while True:
                serving = self._serving_loop
                if serving is not None and serving is not current and serving.is_running():
                    # A websocket loop appeared since this drain started elsewhere: continue there
                    # (the in-memory layer only delivers safely from its own loop).
                    with self._lock:
                        self._drain_loop = serving
                        self._progress = time.monotonic()
                    serving.call_soon_threadsafe(self._start_drain, serving)
                    return
                with self._lock:
                    self._progress = time.monotonic()
                    batch = list(self._pending.values())
                    self._pending.clear()
                    if not batch:
                        self._draining = False
                        self._idle.set()
                        return
                layer = get_channel_layer()
                # Many runs' groups at once: with Redis each group_send is a few round trips, and
                # waiting for them one after the other would add up in the latency. At most
                # BROADCASTS_IN_FLIGHT at a time: redis-py's pool holds 100 connections per event
                # loop and answers MaxConnectionsError past them (an OTLP storer's batch of 512
                # spans touches ~50 runs, 100 groups, each send taking a connection or more).
                limit = asyncio.Semaphore(BROADCASTS_IN_FLIGHT)
                await asyncio.gather(*(self._bounded(limit, layer, message) for message in batch))
                await asyncio.sleep(coalesce_seconds())
        except BaseException:
            with self._lock:
                self._draining = False
                self._idle.set()
            raise

    @classmethod
    async def _bounded(cls, limit: asyncio.Semaphore, layer, message: dict) -> None:
        async with limit:
            await cls._broadcast(layer, message)

    @staticmethod
    async def _broadcast(layer, message: dict) -> None:
        try:
            if message["type"] == "access.changed":
                await layer.group_send(access_group(message["workspace_id"]), message)
                return
            groups = [run_group(message.get("run_pk") or message["run_id"])]
            if message["workspace_id"] is not None:  # None: not a run (a playground execution)
                groups.append(workspace_group(message["workspace_id"]))
            await asyncio.gather(*(layer.group_send(group, message) for group in groups))
            metrics.add("broadcasts")
        except Exception:  # a broken layer must not wedge the drain
            metrics.add("publish_errors")
            log.exception("live broadcast for workspace %s failed", message["workspace_id"])

    def flush(self, timeout: float = 3.0) -> bool:
        """Wait until everything submitted so far has been sent (for writer-only processes)."""
        return self._idle.wait(timeout)


publisher = LivePublisher()


def on_run_change(change: RunChange) -> None:
    publisher.submit(change)


# --------------------------------------------------------------------------------------------
# Access changes


def _membership_changed(sender, instance, **kwargs) -> None:
    from django.db import transaction

    workspace_id = instance.workspace_id
    transaction.on_commit(lambda: publisher.submit_access_change(workspace_id))


def _user_changed(sender, instance, **kwargs) -> None:
    from django.db import transaction

    if instance.pk is None or set(kwargs.get("update_fields") or ()) == {"last_login"}:
        return
    workspace_ids = list(
        Membership.objects.filter(user_id=instance.pk).values_list("workspace_id", flat=True)
    )
    for workspace_id in workspace_ids:
        transaction.on_commit(partial(publisher.submit_access_change, workspace_id))


def connect_access_signals() -> None:
    """Sockets are authorized at connect *and* whenever access may have changed: a membership
    saved (role change) or deleted, a user saved (deactivated) or deleted. `dispatch_uid` keeps
    the connection single however often this runs."""
    from django.contrib.auth import get_user_model
    from django.db.models.signals import post_delete, post_save, pre_delete

    post_save.connect(_membership_changed, sender=Membership, dispatch_uid="live-access-membership-save")
    post_delete.connect(_membership_changed, sender=Membership, dispatch_uid="live-access-membership-delete")
    user_model = get_user_model()
    post_save.connect(_user_changed, sender=user_model, dispatch_uid="live-access-user-save")
    pre_delete.connect(_user_changed, sender=user_model, dispatch_uid="live-access-user-delete")
