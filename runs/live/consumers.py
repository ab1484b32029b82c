"""Websocket consumers: live run pages and live workspace lists.

Protocol of `/ws/runs/<run_id>/?last_seq=N` (JSON text frames):

server -> client
  {"type": "hello", "run_id", "last_seq": <current>, "from_seq": N}
  {"type": "update", "from_seq": a, "last_seq": b, "status", "sent_at", "html"}
        timeline rows a+1..b plus the status badge, gate panel, graph and ledger totals that changed
        since this socket last got them, as htmx out-of-band swaps. Updates are contiguous: each
        `from_seq` equals the previous `last_seq`. `sent_at` is the server's clock (diagnostics).
  {"type": "resync", "reason", "after_seq"}   then close(4000): the client reconnects with its seq
  {"type": "gone"}                             the run was deleted; close(4404)
client -> server
  {"type": "ack", "seq": b}            cumulative: every update up to b is applied (flow control);
                                       a client may ack every update or a few at a time
  {"type": "resync", "after_seq": n}   the client saw a gap or lost state: resend from n

Lossless: the consumer keeps only two integers per subscriber (what it sent, what exists) and reads
rows from the event store, so notifications can be merged or lost without losing rows. Bounded:
at most `LIVE_MAX_INFLIGHT` un-acked updates per subscriber; while the client lags, later events
pile up as a seq range (and go out as one bigger update); a client that acks nothing for
`LIVE_ACK_TIMEOUT_SECONDS` is dropped with a resync notice. Writers never wait for any of this.

Fan-out: one `RunHub` per run and process holds the only channel-layer subscription (group
`run.<id>`) and wakes its pages together at most every `LIVE_MIN_UPDATE_SECONDS`, so pages in step
share one rendering (`UpdateCache`) and the layer carries one message per process, not per page.

Settings (all optional): LIVE_COALESCE_SECONDS (publisher window, 0.03), LIVE_MIN_UPDATE_SECONDS
(0.05), LIVE_MAX_INFLIGHT (8), LIVE_ACK_TIMEOUT_SECONDS (10), LIVE_MAX_ROWS_PER_UPDATE (200).

`/ws/workspace/` (runs list, review inbox) sends `{"type": "run.changed", "run_id", "workspace_id",
"last_seq", "status"}` for the runs of every workspace the user belongs to; pages refresh over HTTP.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import dataclasses
import logging
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import orjson
from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from django.conf import settings

from runs.actions.permissions import Action, role_allows
from runs.live.fragments import CSRF_PLACEHOLDER, RenderedUpdate, render_fragments
from runs.live.publisher import access_group, metrics, publisher, run_group, workspace_group
from runs.models import Membership, Run
from runs.web.request import SESSION_KEY
from runs.web.wire import wire_json

log = logging.getLogger(__name__)

CLOSE_RESYNC = 4000
CLOSE_FORBIDDEN = 4403
CLOSE_GONE = 4404


def _setting(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


@dataclass(frozen=True)
class Subscription:
    run_id: str  # the protocol id, as in the page's URL
    workspace_id: int
    role: str
    last_seq: int
    run_pk: int  # the run row: what groups, hubs and renders are keyed by


def session_workspace_slug(scope: dict) -> str | None:
    session = scope.get("session")
    if session is None:
        return None

    return session.get(SESSION_KEY)


def authorize_run(user, run_id: str, workspace_slug: str | None = None) -> Subscription | None:
    """The caller may watch a run of the workspace their session shows (as the page does: the
    session's workspace, else their first membership); None for everything else."""

    if user is None or not user.is_authenticated:
        return None
    memberships = Membership.objects.filter(user=user)
    membership = None
    if workspace_slug:
        membership = memberships.in_workspace(workspace_slug).first()
    if membership is None:
        membership = memberships.order_by("created_at", "pk").first()
    if membership is None or not role_allows(membership.role, Action.VIEW_RUN):
        return None
    run = (
        Run.unscoped.filter(workspace_id=membership.workspace_id, run_id=run_id)
        .only("pk", "run_id", "workspace_id", "last_seq")
        .first()
    )
    if run is None:
        return None
    return Subscription(run.run_id, run.workspace_id, membership.role, run.last_seq, run.pk)


def allowed_roles(workspace_id: int, user_ids: list[int]) -> dict[int, str]:
    """user id -> role, for those of `user_ids` who may still watch runs of the workspace."""

    rows = Membership.objects.filter(
        workspace_id=workspace_id, user_id__in=user_ids, user__is_active=True
    ).values_list("user_id", "role")
    return {user_id: role for user_id, role in rows if role_allows(role, Action.VIEW_RUN)}


def current_last_seq(run_pk: int | str) -> int | None:

    if not isinstance(run_pk, int):  # another kind of hub (a playground execution)
        return None
    return Run.unscoped.filter(pk=run_pk).values_list("last_seq", flat=True).first()


# --------------------------------------------------------------------------------------------
# Rendering, shared by every subscriber of this process


class UpdateCache:
    """Rendered updates keyed by (run, from, to, role); concurrent misses render once."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._entries: OrderedDict[tuple, asyncio.Future] = OrderedDict()

    async def get(self, sub: Subscription, from_seq: int, upto_seq: int) -> RenderedUpdate:
        if upto_seq <= from_seq:  # panels only: always fresh, never cached
            return await _render(sub, from_seq, upto_seq)
        key = (sub.run_pk, from_seq, upto_seq, sub.role)
        future = self._entries.get(key)
        if future is not None and not (future.done() and future.exception() is not None):
            self._entries.move_to_end(key)
            return await asyncio.shield(future)
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._entries[key] = future
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
        try:
            result = await _render(sub, from_seq, upto_seq)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved
            self._entries.pop(key, None)
            raise
        future.set_result(result)
        return result


update_cache = UpdateCache()


# Renders run on a thread of their own, off the thread that serves sync HTTP views (so pushing
# to sockets never queues page requests or API writes behind it). Unlike database_sync_to_async,
# which closes the connection after every call (CONN_MAX_AGE=0 by default), this thread keeps its
# connection: a render per broadcast would otherwise open a database connection per broadcast. A
# connection that went bad is dropped and the render retried once on a fresh one.
_render_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="live-render")


def close_render_connection() -> None:
    """Close the render thread's database connection (tests, before the test database goes)."""
    from django.db import connections

    _render_pool.submit(connections.close_all).result()


def _render_with_connection(sub: Subscription, from_seq: int, upto_seq: int) -> RenderedUpdate:
    from django.db import DatabaseError, connection

    try:
        return render_update(sub, from_seq, upto_seq)
    except DatabaseError:
        connection.close()
        return render_update(sub, from_seq, upto_seq)


async def _render(sub: Subscription, from_seq: int, upto_seq: int) -> RenderedUpdate:
    metrics.add("renders")
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(
        _render_pool, contextvars.copy_context().run, _render_with_connection, sub, from_seq, upto_seq
    )


def render_update(sub: Subscription, from_seq: int, upto_seq: int) -> RenderedUpdate:

    return render_fragments(run_pk=sub.run_pk, role=sub.role, after_seq=from_seq, upto_seq=upto_seq)


# --------------------------------------------------------------------------------------------
# Per-process fan-out


class RunHub:
    """The one subscription of this process to a run's group, shared by its local sockets.

    A hundred pages open on one run cost one channel-layer delivery per broadcast in this process
    (not a hundred); each page's sender is then woken directly. Hubs live per event loop.
    """

    def __init__(self, run_pk: int | str, loop: asyncio.AbstractEventLoop, workspace_id: int = 0) -> None:
        self.run_pk = run_pk
        self.workspace_id = workspace_id
        self.loop = loop
        self.subscribers: set[RunLiveConsumer] = set()
        self.channel: str | None = None
        self.pump: asyncio.Task | None = None
        self.ready = asyncio.Event()
        self.pending: dict | None = None  # notifications merged since the last tick
        self.last_tick = 0.0
        self.tick_handle: asyncio.TimerHandle | None = None

    async def add(self, consumer: RunLiveConsumer, layer) -> None:
        self.subscribers.add(consumer)
        if self.pump is None:
            self.pump = asyncio.ensure_future(self._pump(layer))
        await self.ready.wait()  # joined the group: nothing committed from now on is missed

    async def remove(self, consumer: RunLiveConsumer) -> None:
        self.subscribers.discard(consumer)
        if not self.subscribers and self.pump is not None:
            _hubs.pop((id(self.loop), self.run_pk), None)
            self.pump.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.pump

    async def _pump(self, layer) -> None:
        group = run_group(self.run_pk)
        access = access_group(self.workspace_id)
        first = True
        while True:
            try:
                self.channel = (
                    await layer.new_channel()
                )  # the default prefix: channels_redis shares one reader
                await layer.group_add(group, self.channel)
                if self.workspace_id:
                    await layer.group_add(access, self.channel)
                self.ready.set()
                if not first:
                    # Notifications may have been lost while the layer was away: ask the store.
                    head = await database_sync_to_async(current_last_seq)(self.run_pk)
                    if head is not None:
                        self._merge(
                            {
                                "type": "run.changed",
                                "run_pk": self.run_pk,
                                "first_seq": 0,
                                "last_seq": head,
                                "status": None,
                            }
                        )
                        self._schedule()
                first = False
                while True:
                    message = await layer.receive(self.channel)
                    if message.get("type") == "access.changed":
                        asyncio.ensure_future(self.recheck())
                        continue
                    if message.get("type") != "run.changed":
                        continue
                    self._merge(message)
                    self._schedule()
            except asyncio.CancelledError:
                if self.tick_handle is not None:
                    self.tick_handle.cancel()
                with contextlib.suppress(Exception):
                    await asyncio.shield(layer.group_discard(group, self.channel))
                    await asyncio.shield(layer.group_discard(access, self.channel))
                raise
            except Exception:
                metrics.add("layer_errors")
                log.exception("live: the channel layer failed for run #%s; rejoining", self.run_pk)
                await asyncio.sleep(1.0)

    def _merge(self, message: dict) -> None:
        pending = self.pending
        if pending is None:
            self.pending = dict(message)
            return
        first = int(message.get("first_seq") or 0)
        if first and (not pending.get("first_seq") or first < pending["first_seq"]):
            pending["first_seq"] = first
        pending["last_seq"] = max(int(pending.get("last_seq") or 0), int(message.get("last_seq") or 0))
        if message.get("status") and pending.get("status") != "deleted":
            pending["status"] = message["status"]

    def _schedule(self) -> None:
        """Wake the local pages at most once per LIVE_MIN_UPDATE_SECONDS, all at the same moment:
        pages in step ask for the same seq range, so one rendering serves them all."""
        if self.tick_handle is not None:
            return
        spacing = _setting("LIVE_MIN_UPDATE_SECONDS", 0.05)
        wait = self.last_tick + spacing - self.loop.time()
        if wait <= 0 or (self.pending or {}).get("status") == "deleted":
            self._tick()
        else:
            self.tick_handle = self.loop.call_later(wait, self._tick)

    def _tick(self) -> None:
        self.tick_handle = None
        self.last_tick = self.loop.time()
        message, self.pending = self.pending, None
        if message is None:
            return
        asyncio.ensure_future(self._deliver(message))

    async def _deliver(self, message: dict) -> None:
        # Authorization is not only at connect: who may still watch is asked again (one query for
        # every page of this run in this process) before anything new is pushed.
        await self.recheck()
        for consumer in list(self.subscribers):
            consumer.on_change(message)

    async def recheck(self) -> None:
        """Close the pages whose user lost access (membership removed, user deactivated) and give
        the others their current role (which decides the gate panel's controls)."""
        subscribers = [c for c in self.subscribers if getattr(c, "sub", None) is not None]
        if not subscribers:
            return
        users = sorted({c.user_pk for c in subscribers})
        try:
            roles = await database_sync_to_async(allowed_roles)(self.workspace_id, users)
        except Exception:
            log.exception("live: access re-check failed for run #%s", self.run_pk)
            return
        for consumer in subscribers:
            role = roles.get(consumer.user_pk)
            if role is None:
                await consumer.revoke()
            elif role != consumer.sub.role:
                consumer.sub = dataclasses.replace(consumer.sub, role=role)
                consumer.panel_digests = {}


_hubs: dict[tuple[int, int | str], RunHub] = {}


def hub_for(run_pk: int | str, workspace_id: int = 0) -> RunHub:
    loop = asyncio.get_running_loop()
    key = (id(loop), run_pk)
    hub = _hubs.get(key)
    if hub is None or hub.loop is not loop:
        hub = _hubs[key] = RunHub(run_pk, loop, workspace_id)
    return hub


# --------------------------------------------------------------------------------------------
# Consumers


class LiveConsumer(AsyncWebsocketConsumer):
    async def dispatch(self, message: dict) -> None:
        # Channels hops to the sync thread before every handler to close stale DB connections
        # (aclose_old_connections). These handlers never touch the database themselves (every query
        # goes through database_sync_to_async, which does that cleanup in its own thread), and at
        # thousands of acks and notifications per second that hop is the bottleneck: skip it.
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)


class RunLiveConsumer(LiveConsumer):
    """One open run page."""

    # No channel of its own on the layer: the run's hub subscribes once for the whole process, so a
    # page neither costs a layer receiver nor dies with the layer's connection (the hub rejoins).
    channel_layer_alias = "__live_pages_use_the_run_hub__"
    sub: Subscription | None = None
    closing = False
    user_pk = 0

    async def connect(self) -> None:
        run_id = self.scope["url_route"]["kwargs"]["run_id"]
        sub = await database_sync_to_async(authorize_run)(
            self.scope.get("user"), run_id, session_workspace_slug(self.scope)
        )
        if sub is None:
            metrics.add("refused")
            await self.close(code=CLOSE_FORBIDDEN)  # before accept: the handshake is refused (403)
            return
        self.sub = sub
        publisher.attach_loop(asyncio.get_running_loop())
        self.target_seq = 0
        self.status_dirty = False
        self.wake = asyncio.Event()
        self.user_pk = self.scope["user"].pk
        self.hub = hub_for(sub.run_pk, sub.workspace_id)
        await self.hub.add(self, get_channel_layer())
        await self.accept()
        metrics.add("connections")
        metrics.add("open")
        # Read the head only after the hub joined the group: nothing committed from here on is missed.
        head = await database_sync_to_async(current_last_seq)(sub.run_pk)
        head = sub.last_seq if head is None else head
        client_seq = self._client_seq(head)
        if client_seq < head:
            metrics.add("resyncs")
        self.sent_seq = client_seq
        self.acked_seq = client_seq
        self.unacked: collections.deque[int] = collections.deque()  # last_seq of each un-acked update
        self.target_seq = max(self.target_seq, head)
        self.panel_digests: dict[str, str] = {}  # what this page shows now (unknown until we send)
        self.last_ack_at = asyncio.get_running_loop().time()
        self.acked = asyncio.Event()
        self.closing = False
        # Forms inside the gate panel post with this socket's own CSRF token (the cookie's secret).
        cookie = (self.scope.get("cookies") or {}).get(settings.CSRF_COOKIE_NAME, "")
        self.csrf_token = cookie if cookie.isalnum() else ""
        await self._send_json({"type": "hello", "run_id": run_id, "last_seq": head, "from_seq": client_seq})
        self.sender = asyncio.ensure_future(self._sender())
        if self.target_seq > self.sent_seq:
            self.wake.set()

    def _client_seq(self, head: int) -> int:
        from urllib.parse import parse_qs

        query = parse_qs(self.scope.get("query_string", b"").decode())
        raw = (query.get("last_seq") or [None])[0]
        try:
            value = int(raw) if raw is not None else head
        except ValueError:
            value = head
        return max(0, min(value, head))

    async def disconnect(self, code: int) -> None:
        if self.sub is None:
            return
        metrics.add("open", -1)
        self.closing = True
        sender = getattr(self, "sender", None)
        if sender is not None:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender
        await self.hub.remove(self)

    # -- from the hub: O(1), never renders or waits
    def on_change(self, message: dict) -> None:
        if message.get("status") == "deleted":
            asyncio.ensure_future(self._gone())
            return
        first, last = int(message.get("first_seq") or 0), int(message.get("last_seq") or 0)
        if first and first > self.target_seq + 1:
            metrics.add("gaps")  # a notification was lost or merged: the store still has the rows
        if last > self.target_seq:
            self.target_seq = last
        else:
            self.status_dirty = True  # a projection-only change (or a duplicate): refresh the panels
        self.wake.set()

    async def revoke(self) -> None:
        """The user may no longer watch this run: say so and close (as at connect: 4403)."""
        if self.closing:
            return
        self.closing = True
        metrics.add("revoked")
        with contextlib.suppress(Exception):
            await self._send_json({"type": "revoked"})
        await self.close(code=CLOSE_FORBIDDEN)

    async def _gone(self) -> None:
        self.closing = True
        await self._send_json({"type": "gone"})
        await self.close(code=CLOSE_GONE)

    # -- from the client
    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            message = orjson.loads(text_data or bytes_data or b"")
        except orjson.JSONDecodeError:
            return
        if not isinstance(message, dict):
            return
        kind = message.get("type")
        if kind == "ack":  # cumulative: acknowledges every update up to `seq`
            seq = message.get("seq")
            if isinstance(seq, int) and seq > self.acked_seq:
                self.acked_seq = min(seq, self.sent_seq)
                while self.unacked and self.unacked[0] <= self.acked_seq:
                    self.unacked.popleft()
            self.last_ack_at = asyncio.get_running_loop().time()
            self.acked.set()
        elif kind == "resync":
            seq = message.get("after_seq")
            if isinstance(seq, int) and 0 <= seq <= self.sent_seq:
                metrics.add("resyncs")
                self.sent_seq = self.acked_seq = seq
                self.unacked.clear()
                self.last_ack_at = asyncio.get_running_loop().time()
                self.acked.set()
                self.wake.set()

    # -- the per-subscriber sender
    async def _sender(self) -> None:
        assert self.sub is not None
        max_inflight = int(_setting("LIVE_MAX_INFLIGHT", 8))
        ack_timeout = _setting("LIVE_ACK_TIMEOUT_SECONDS", 10.0)
        batch = int(_setting("LIVE_MAX_ROWS_PER_UPDATE", 200))
        loop = asyncio.get_running_loop()
        while not self.closing:
            await self.wake.wait()
            self.wake.clear()
            while self.sent_seq < self.target_seq or self.status_dirty:
                while len(self.unacked) >= max_inflight:
                    self.acked.clear()
                    waited = loop.time() - self.last_ack_at
                    try:
                        await asyncio.wait_for(self.acked.wait(), max(0.05, ack_timeout - waited))
                    except TimeoutError:
                        await self._drop("slow")
                        return
                upto = min(self.target_seq, self.sent_seq + batch)
                self.status_dirty = False
                try:
                    update = await update_cache.get(self.sub, self.sent_seq, upto)
                except Exception:  # e.g. the run was deleted meanwhile: the page reconnects and sees
                    log.exception(
                        "live: rendering run %s %s..%s failed", self.sub.run_id, self.sent_seq, upto
                    )
                    await self._drop("error")
                    return
                await self.send(text_data=self._compose(update))
                metrics.add("updates_sent")
                metrics.add("rows_sent", upto - self.sent_seq)
                self.sent_seq = upto
                self.unacked.append(upto)

    def _compose(self, update: RenderedUpdate) -> str:
        """The update as this subscriber needs it: rows plus the panels that changed for it."""
        parts = [update.rows.encoded] if update.rows is not None else []
        if update.spans is not None:
            parts.append(update.spans.encoded)
        for panel in update.panels:
            if self.panel_digests.get(panel.name) != panel.digest:
                self.panel_digests[panel.name] = panel.digest
                parts.append(panel.encoded)
        html = "".join(parts).replace(CSRF_PLACEHOLDER, self.csrf_token)
        return (
            f'{{"type":"update","from_seq":{update.after_seq},"last_seq":{update.upto_seq},'
            f'"status":{_dumps(update.status)},"sent_at":{time.time():.4f},"html":"{html}"}}'
        )

    async def _drop(self, reason: str) -> None:
        if reason == "slow":
            metrics.add("drops")
        with contextlib.suppress(Exception):
            await self._send_json({"type": "resync", "reason": reason, "after_seq": self.acked_seq})
        self.closing = True
        await self.close(code=CLOSE_RESYNC)

    async def _send_json(self, message: dict) -> None:
        await self.send(text_data=_dumps(message))


class WorkspaceLiveConsumer(LiveConsumer):
    """Runs list and review inbox: told which runs changed (coalesced by the publisher).

    Sends `{"type": "run.changed", "run_id", "last_seq", "status"}`; the page refreshes the
    affected fragment over HTTP (htmx), so nothing is rendered here.
    """

    workspace_ids: list[int] = []

    async def connect(self) -> None:
        user = self.scope.get("user")
        self.workspace_ids = await database_sync_to_async(_member_workspaces)(user)
        if not self.workspace_ids:
            metrics.add("refused")
            await self.close(code=CLOSE_FORBIDDEN)
            return
        publisher.attach_loop(asyncio.get_running_loop())
        for workspace_id in self.workspace_ids:
            await self.channel_layer.group_add(workspace_group(workspace_id), self.channel_name)
            await self.channel_layer.group_add(access_group(workspace_id), self.channel_name)
        await self.accept()
        metrics.add("connections")
        metrics.add("open")

    async def disconnect(self, code: int) -> None:
        if not self.workspace_ids:
            return
        metrics.add("open", -1)
        for workspace_id in self.workspace_ids:
            await self.channel_layer.group_discard(workspace_group(workspace_id), self.channel_name)
            await self.channel_layer.group_discard(access_group(workspace_id), self.channel_name)

    async def access_changed(self, message: dict) -> None:
        """Membership changed somewhere: stop telling this user about workspaces they left."""
        still = set(await database_sync_to_async(_member_workspaces)(self.scope.get("user")))
        for workspace_id in [w for w in self.workspace_ids if w not in still]:
            await self.channel_layer.group_discard(workspace_group(workspace_id), self.channel_name)
            await self.channel_layer.group_discard(access_group(workspace_id), self.channel_name)
            self.workspace_ids.remove(workspace_id)
        if not self.workspace_ids:
            metrics.add("revoked")
            await self.close(code=CLOSE_FORBIDDEN)

    async def run_changed(self, message: dict) -> None:
        await self.send(
            text_data=_dumps(
                {
                    "type": "run.changed",
                    "run_id": message["run_id"],
                    "workspace_id": message["workspace_id"],
                    "last_seq": message["last_seq"],
                    "status": message["status"],
                }
            )
        )


def _member_workspaces(user) -> list[int]:

    if user is None or not user.is_authenticated:
        return []
    return list(
        Membership.objects.filter(user_id=user.pk, user__is_active=True)
        .order_by("workspace_id")
        .values_list("workspace_id", flat=True)
    )


def _dumps(message: object) -> str:
    return wire_json(message).decode()
