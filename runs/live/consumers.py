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

Fan-out (`runs.live.fanout`): one `RunHub` per run and process holds the only channel-layer
subscription (group `run.<id>`), reads each committed batch from the store once, at most every
`LIVE_MIN_UPDATE_SECONDS`, and keeps it as a numbered segment; every page of the run in the
process composes its update from those segments. DB reads per commit batch equal the number of
processes, the layer carries one message per process, not per page. Pages in step are sent each new
segment by the hub itself, in one loop (`RunHub._broadcast`: `in_step`, `took`, `send_frame` below);
a page's own sender task only wakes for what is particular to it: a catch-up after a reconnect or a
resync, a wait for acks, a message with a gate form (its CSRF token).

Settings (all optional): LIVE_COALESCE_SECONDS (publisher window, 0.03), LIVE_MIN_UPDATE_SECONDS
(0.05), LIVE_MAX_INFLIGHT (8), LIVE_ACK_TIMEOUT_SECONDS (10), LIVE_MAX_ROWS_PER_UPDATE (200),
LIVE_HUB_SEGMENTS (64, batches a hub keeps for pages in step), LIVE_DRAIN_SECONDS (0.05, how long a
hub's delivery waits at most for its frames to leave daphne's buffers before the next one),
LIVE_LAG_SECONDS (0.01, a loop turn slower than this counts as `lagged_deliveries`).

`/ws/workspace/` (runs list, review inbox) sends `{"type": "run.changed", "run_id", "workspace_id",
"last_seq", "status"}` for the runs of every workspace the user belongs to; pages refresh over HTTP.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import time

import orjson
from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from django.conf import settings
from django.db.models import OuterRef, Subquery

from runs.actions.permissions import Action, role_allows
from runs.live.auth import resolve_user
from runs.live.fanout import (  # noqa: F401  (hub_for, close_render_connection: imported from here)
    Plan,
    Subscription,
    close_render_connection,
    current_last_seq,
    hub_for,
    setting,
    update_cache,
)
from runs.live.fragments import CSRF_PLACEHOLDER, RenderedUpdate
from runs.live.publisher import access_group, metrics, publisher, workspace_group
from runs.live.spawn import Tasks, cancel_all, spawn
from runs.live.transport import backlog, send_now
from runs.models import Membership, Run
from runs.selectors.runs import JUDGE_CALL_TAG
from runs.web.request import SESSION_KEY
from runs.web.wire import wire_json

log = logging.getLogger(__name__)

ACK_PREFIX = b'{"type":"ack",'  # how live.js (JSON.stringify) and bench/live_client.mjs send an ack
CLOSE_RESYNC = 4000
CLOSE_FORBIDDEN = 4403
CLOSE_GONE = 4404


def session_workspace_slug(scope: dict) -> str | None:
    session = scope.get("session")
    if session is None:
        return None

    return session.get(SESSION_KEY)


def authorize_run(user, run_id: str, workspace_slug: str | None = None) -> Subscription | None:
    """The caller may watch a run of the workspace their session shows (as the page does: the
    session's workspace, else their first membership); None for everything else. One query: the
    user's memberships, each with the run of that id in its workspace (if any)."""

    if user is None or not user.is_authenticated:
        return None
    runs = Run.unscoped.filter(workspace_id=OuterRef("workspace_id"), run_id=run_id)
    rows = list(
        Membership.objects.filter(user=user)
        .order_by("created_at", "pk")
        .annotate(
            run_pk=Subquery(runs.values("pk")[:1]),
            run_last_seq=Subquery(runs.values("last_seq")[:1]),
            run_tags=Subquery(runs.values("tags")[:1], output_field=Run._meta.get_field("tags")),
        )
        .values_list("workspace_id", "role", "workspace__slug", "run_pk", "run_last_seq", "run_tags")
    )
    chosen = None
    if workspace_slug and isinstance(workspace_slug, str):
        chosen = next((row for row in rows if row[2] == workspace_slug), None)
    if chosen is None and rows:
        chosen = rows[0]
    if chosen is None or not role_allows(chosen[1], Action.VIEW_RUN) or chosen[3] is None:
        return None
    workspace_id, role, _slug, run_pk, last_seq, tags = chosen
    if JUDGE_CALL_TAG in (tags or []) and not role_allows(role, Action.MANAGE_JUDGES):
        return None  # a gate judge's own call: its owners' to watch, as its page (runs.web.request)
    return Subscription(run_id, workspace_id, role, last_seq, run_pk)


def authorize_socket(scope: dict, run_id: str) -> Subscription | None:
    """Sync, one database hop for a connecting run socket: the session's user (deferred by
    runs.live.auth), then `authorize_run`."""
    user = resolve_user(scope)
    return authorize_run(user, run_id, session_workspace_slug(scope))


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
    waiting = False  # the sender waits for work: the hub may send this page its next update itself
    user_pk = 0
    buffered = False  # the last frame sent by `send_frame` is (partly) still in daphne's transport
    wire: tuple | None = None  # (daphne server, websocket protocol): where prepared frames go

    async def connect(self) -> None:
        run_id = self.scope["url_route"]["kwargs"]["run_id"]
        asked_at = asyncio.get_running_loop().time()
        sub = await database_sync_to_async(authorize_socket)(self.scope, run_id)
        if sub is None:
            metrics.add("refused")
            await self.close(code=CLOSE_FORBIDDEN)  # before accept: the handshake is refused (403)
            return
        self.sub = sub
        self.background: Tasks = set()  # this page's sender and the like (runs.live.spawn)
        publisher.attach_loop(asyncio.get_running_loop())
        self.target_seq = 0
        self.seg_index = -1  # the hub segment this page follows (-1: not at a segment boundary)
        self.wake = asyncio.Event()
        self.user_pk = self.scope["user"].pk
        self.hub = hub_for(sub.run_pk, sub.workspace_id)
        await self.hub.add(self, get_channel_layer())
        await self.accept()
        metrics.add("connections")
        metrics.add("open")
        # The head must be read after the hub joined the group, so that nothing committed later is
        # missed: the run row read at authorization is when the hub was in the group already (the
        # usual case: every socket but the first of a run in this process); else read it again.
        if self.hub.ready_at is not None and self.hub.ready_at <= asked_at:
            head = sub.last_seq
        else:
            head = await database_sync_to_async(current_last_seq)(sub.run_pk)
            head = sub.last_seq if head is None else head
        self.hub.note_head(head)
        client_seq = self._client_seq(head)
        if client_seq < head:
            metrics.add("resyncs")
        self.sent_seq = client_seq
        self.acked_seq = client_seq
        self.unacked: collections.deque[int] = collections.deque()  # last_seq of each un-acked update
        self.target_seq = max(self.target_seq, head)
        if client_seq == self.hub.read_seq:
            self.seg_index = self.hub.next_index
        self.panel_digests: dict[str, str] = {}  # what this page shows now (unknown until we send)
        self.last_ack_at = asyncio.get_running_loop().time()
        self.window_since = self.last_ack_at  # when the oldest un-acked update went out
        self.acked = asyncio.Event()
        self.closing = False
        # Forms inside the gate panel post with this socket's own CSRF token (the cookie's secret).
        cookie = (self.scope.get("cookies") or {}).get(settings.CSRF_COOKIE_NAME, "")
        self.csrf_token = cookie if cookie.isalnum() else ""
        self.wire = daphne_protocol(self.base_send)
        if self.wire is not None:
            self._take_acks_from(self.wire[1])
        await self._send_json({"type": "hello", "run_id": run_id, "last_seq": head, "from_seq": client_seq})
        self.sender = spawn(self.background, self._sender(), what=f"the sender of a page of run {run_id}")
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
        if self.wire is not None:
            vars(self.wire[1]).pop("onMessage", None)  # daphne's own handlers again
            vars(self.wire[1]).pop("dataReceived", None)
        await cancel_all(self.background)  # the sender, a "gone" still closing (failures were logged)
        await self.hub.remove(self)

    # -- from the hub: O(1), never renders or waits
    def on_change(self, message: dict) -> None:
        if message.get("status") == "deleted":
            spawn(self.background, self._gone(), what="closing the page of a deleted run")
            return
        first, last = int(message.get("first_seq") or 0), int(message.get("last_seq") or 0)
        if first and first > self.target_seq + 1:
            metrics.add("gaps")  # a notification was lost or merged: the store still has the rows
        if last > self.target_seq:
            self.target_seq = last
        if self.waiting and self.sent_seq >= self.target_seq and self.seg_index >= self.hub.next_index:
            # nothing for this page (a notification of rows the hub had read and sent already, e.g.
            # after it rejoined the layer): its sender would wake, find nothing to do and sleep again
            return
        self.wake.set()  # the hub's new segments (rows or panels) are waiting

    # -- from the hub's broadcast: synchronous, nothing awaits between the check and the send
    def in_step(self, index: int, after_seq: int, max_inflight: int) -> bool:
        """The hub may send segment `index` (rows after `after_seq`) to this page itself: the page is
        at that boundary, its sender is idle with nothing pending, and its ack window has room."""
        return (
            self.waiting
            and not self.closing
            and not self.wake.is_set()
            and self.seg_index == index
            and self.sent_seq == after_seq
            and len(self.unacked) < max_inflight
        )

    def took(self, upto: int, next_index: int, digests: dict[str, str], head: tuple[int, int]) -> None:
        """The hub sends this page the update up to `upto` (its panels now `digests`); `head` is the
        notification's (first_seq, last_seq), as `on_change` would have had it."""
        first, last = head
        if first and first > self.target_seq + 1:
            metrics.add("gaps")
        self.target_seq = max(self.target_seq, last)
        self.sent_seq = upto
        self.seg_index = next_index
        self.panel_digests = digests
        if not self.unacked:
            self.window_since = self.hub.loop.time()
        self.unacked.append(upto)
        if self.target_seq > self.sent_seq:  # announced rows the hub has not read yet
            self.wake.set()

    def send_frame(self, entry: list) -> bool:
        """Send a message shared by the pages in step (`entry`: [text, prepared frame | None] of
        `hub.prepared`) as one pre-framed websocket frame, straight to daphne's protocol (autobahn's
        prepareMessage/sendPreparedMessage, its broadcast path): no ASGI message, no per-socket
        encoding or framing. False when that is not possible (not under daphne, the socket is
        closing): the caller sends the text as usual."""
        if self.wire is None:
            return False
        server, protocol = self.wire
        if protocol.state != protocol.STATE_OPEN or server.connections.get(protocol, {}).get("disconnected"):
            return False
        if entry[1] is None:
            entry[1] = protocol.factory.prepareMessage(entry[0].encode())
        if protocol.send_queue or protocol._perMessageCompress is not None:
            protocol.sendPreparedMessage(entry[1])
            self.buffered = True
        else:
            # What sendPreparedMessage -> sendData does with nothing queued and no compression (daphne
            # negotiates none), minus its debug-log call, whose arguments autobahn formats on every
            # send even with debug logging off (hltype/hlval: a third of the send's CPU in a profile);
            # and with the transport's buffer empty, sent at once (`send_now`: one send(2) instead of
            # Twisted's register-a-writer, send on the next turn, unregister).
            self.buffered = not send_now(protocol.transport, entry[1].payloadHybi)
        return True

    def backlog(self) -> int:
        """Bytes of this page's frames still waiting in daphne's transport (0 when not under daphne)."""
        if self.wire is None:
            return 0
        transport = self.wire[1].transport
        return backlog(transport) if transport is not None else 0

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
    def _take_acks_from(self, protocol) -> None:
        """Under daphne, acks (a page sends one every few updates: most of what clients send) are
        taken where daphne receives the frame, synchronously on the same loop, instead of as ASGI
        messages through daphne's queue, the middleware and this consumer's task (a task wake-up per
        ack). Any other frame goes the usual way. Acks are cumulative, so taking one before a
        message the client sent earlier (a resync, still queued) changes nothing."""
        usual = protocol.onMessage

        def on_message(payload: bytes, is_binary: bool) -> None:
            if is_binary or protocol.muted or not payload.startswith(ACK_PREFIX):
                usual(payload, is_binary)
                return
            protocol.last_ping = time.time()  # as daphne's onMessage: the connection is alive
            try:
                message = orjson.loads(payload)
            except orjson.JSONDecodeError:
                return
            if isinstance(message, dict):
                metrics.add("frame_acks")
                self._ack(message.get("seq"))

        protocol.onMessage = on_message
        if getattr(protocol.log, "_log_level", "debug") not in ("debug", "trace") and hasattr(
            protocol, "_dataReceived"
        ):
            # autobahn's Twisted dataReceived is a debug-log call, then _dataReceived; the log call's
            # arguments (hltype/hlval) are formatted on every read even with debug logging off: about
            # 17 us per ack received. Skipped while that level is off.
            protocol.dataReceived = protocol._dataReceived

    def _ack(self, seq: object) -> None:
        """Cumulative: acknowledges every update up to `seq`. An ack that does not move `acked_seq`
        still takes the updates it names out of the window: an update of panels only (a status
        change, no new rows) ends at the seq the page had acked already, and its ack names that same
        seq. Ignored, it held a slot of the window for good (with a window of 1 the page then got
        nothing more and was dropped as slow at the ack timeout)."""
        if self.sub is None or self.closing:
            return
        if isinstance(seq, int) and seq >= 0:
            if seq > self.acked_seq:
                self.acked_seq = min(seq, self.sent_seq)
            while self.unacked and self.unacked[0] <= self.acked_seq:
                self.unacked.popleft()
        self.last_ack_at = asyncio.get_running_loop().time()
        self.acked.set()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            message = orjson.loads(text_data or bytes_data or b"")
        except orjson.JSONDecodeError:
            return
        if not isinstance(message, dict):
            return
        kind = message.get("type")
        if kind == "ack":
            self._ack(message.get("seq"))
        elif kind == "resync":
            seq = message.get("after_seq")
            if isinstance(seq, int) and 0 <= seq <= self.sent_seq:
                metrics.add("resyncs")
                self.sent_seq = self.acked_seq = seq
                self.seg_index = -1
                self.unacked.clear()
                self.last_ack_at = asyncio.get_running_loop().time()
                self.acked.set()
                self.wake.set()

    # -- the per-subscriber sender: composes from the hub's segments, reads only to catch up
    async def _sender(self) -> None:
        assert self.sub is not None
        max_inflight = int(setting("LIVE_MAX_INFLIGHT", 8))
        ack_timeout = setting("LIVE_ACK_TIMEOUT_SECONDS", 10.0)
        batch = int(setting("LIVE_MAX_ROWS_PER_UPDATE", 200))
        loop = asyncio.get_running_loop()
        while not self.closing:
            self.waiting = True
            try:
                await self.wake.wait()
            finally:
                self.waiting = False
            self.wake.clear()
            metrics.add("sender_wakeups")
            while not self.closing and (
                self.sent_seq < self.target_seq or self.seg_index < self.hub.next_index
            ):
                while len(self.unacked) >= max_inflight:
                    self.acked.clear()
                    # how long the page has had to ack: since its last ack, or since the oldest update
                    # it has not acked went out if that is later (a page quiet for minutes was not late)
                    waited = loop.time() - max(self.last_ack_at, self.window_since)
                    try:
                        await asyncio.wait_for(self.acked.wait(), max(0.05, ack_timeout - waited))
                    except TimeoutError:
                        await self.drop("slow")
                        return
                plan = self.hub.plan(self.sent_seq, self.seg_index, batch)
                if plan is None:  # the hub has not read that far yet: it wakes us when it has
                    self.hub.request(self.target_seq)
                    break
                if not plan.segments and plan.catchup is None:
                    self.seg_index = plan.next_index
                    continue
                try:
                    updates = await self._updates(plan)
                except Exception:  # e.g. the run was deleted meanwhile: the page reconnects and sees
                    log.exception("live: rendering run %s after %s failed", self.sub.run_id, self.sent_seq)
                    await self.drop("error")
                    return
                upto = updates[-1].upto_seq
                shared = tuple(seg.index for seg in plan.segments) if plan.catchup is None else None
                text = self._compose(updates, shared)
                if self.hub.flushing is not None:  # a broadcast's texts still going out: after them
                    await asyncio.shield(self.hub.flushing)
                metrics.add("updates_sent")
                metrics.add("rows_sent", upto - self.sent_seq)
                # the page's state moves before the send: its ack can be read while `send` awaits, and
                # an ack of rows not yet counted as sent would be cut to the old `sent_seq` and lost
                # (the window then stays full until the ack timeout drops the page). The hub leaves
                # this page alone meanwhile: `in_step` wants its sender idle.
                self.sent_seq = upto
                self.seg_index = plan.next_index
                if not self.unacked:
                    self.window_since = loop.time()
                self.unacked.append(upto)
                if not self._send_prepared(text):
                    await self.send(text_data=text)

    async def _updates(self, plan: Plan) -> list[RenderedUpdate]:
        assert self.sub is not None
        if plan.catchup is not None:
            return [await update_cache.get(self.sub, *plan.catchup)]
        updates = []
        for segment in plan.segments:
            update = segment.batch.for_role(self.sub.role)
            if update is None:  # a role the hub did not render for (it changed meanwhile)
                update = await update_cache.get(self.sub, segment.batch.after_seq, segment.batch.upto_seq)
            updates.append(update)
        return updates

    def _compose(self, updates: list[RenderedUpdate], shared: tuple[int, ...] | None = None) -> str:
        """The updates as one message for this subscriber (`RunHub.compose`: pages in step that need
        the same panels get the very same text, composed once per process); only a message that
        carries a form (the gate panel) gets this socket's CSRF token."""
        text, self.panel_digests, reused = self.hub.compose(updates, self.panel_digests, shared)
        if reused:
            metrics.add("shared_sends")
        return text.replace(CSRF_PLACEHOLDER, self.csrf_token) if CSRF_PLACEHOLDER in text else text

    def _send_prepared(self, text: str) -> bool:
        """A text shared by the pages in step goes as the hub's prepared frame (`send_frame`)."""
        entry = self.hub.prepared.get(id(text))
        if entry is None or entry[0] is not text or not self.send_frame(entry):
            return False
        metrics.add("prepared_sends")
        metrics.add("buffered_writes" if self.buffered else "direct_writes")
        return True

    async def drop(self, reason: str) -> None:
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


def daphne_protocol(send) -> tuple | None:
    """(daphne Server, its websocket protocol) behind a consumer's ASGI `send`: daphne passes
    `partial(Server.handle_reply, protocol)`, which channels' SessionMiddleware wraps (`real_send`).
    None under any other server or wrapper (tests' communicators): then messages go as ASGI ones."""
    real = getattr(getattr(send, "__self__", None), "real_send", send)
    if not isinstance(real, functools.partial) or not real.args:
        return None
    server = getattr(real.func, "__self__", None)
    protocol = real.args[0]
    if getattr(real.func, "__name__", "") != "handle_reply" or not hasattr(server, "connections"):
        return None
    if not hasattr(protocol, "sendPreparedMessage") or not hasattr(protocol, "factory"):
        return None
    return server, protocol


def _dumps(message: object) -> str:
    return wire_json(message).decode()
