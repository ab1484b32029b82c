"""Live fan-out per process: one reader per (process, run), many sockets.

A `RunHub` holds this process's only channel-layer subscription to a run's group (`run.<id>`). When
a committed batch is announced it reads the batch from the store ONCE (rows once, panels once per
kind of gate control among the pages open here) and keeps the result as a `Segment` in a short
ring; every page of the run in this process then builds its update from the ring, without a query.
DB reads per commit batch therefore equal the number of processes that have the run open, not
the number of subscribers (`metrics.batch_reads`).

Segments are contiguous (each starts at the previous one's `upto_seq`; a zero-width one carries
panels after a projection-only change) and numbered. A page follows them by number; a page that
is not at a segment boundary (it reconnected with an older seq, asked for a resync, or fell
behind the ring of `LIVE_HUB_SEGMENTS`) first catches up from the store through `UpdateCache`
(`metrics.catchup_reads`: shared by the pages asking for the same range) and then joins the ring.

Broadcast: when a read adds segments, the hub sends them itself to every page in step (at the
segment boundary, its sender idle, room in its ack window): one loop over the sockets, the message
composed once per (panels the pages show, role) and written as one pre-framed websocket frame
(`metrics.hub_broadcasts`, `broadcast_sends`), straight to the socket when daphne's transport holds
nothing (`runs.live.transport.send_now`, `metrics.direct_writes`). No page task is woken for it.
Every other page (out of step, catching up, behind on acks, or sent a gate form, which carries its
own CSRF token) is woken and takes its own path (`metrics.sender_wakeups`); a page with nothing to
send is not woken.

Backlog: a hub runs one delivery (read, broadcast, a loop turn, the drain of frames still in daphne's
buffers) at a time; notifications that arrive meanwhile merge into the next read (`metrics.hub_merges`),
so a process that falls behind sends fewer, larger updates (every page still gets contiguous ranges).

Authorization is re-checked in the same read (one query for every page of the run here), before
anything is pushed: a page whose user lost access is closed before the broadcast.
Playground executions use the same hub with a string key: they are woken, they read themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from runs.actions.permissions import Action, role_allows
from runs.live.fragments import (
    CSRF_PLACEHOLDER,
    RenderedBatch,
    RenderedUpdate,
    render_batch,
    render_fragments,
)
from runs.live.publisher import access_group, metrics, run_group
from runs.live.spawn import Tasks, cancel_all, spawn
from runs.models import Membership, Run
from runs.web.wire import wire_json

log = logging.getLogger(__name__)


def setting(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


@dataclass(frozen=True)
class Subscription:
    run_id: str  # the protocol id, as in the page's URL
    workspace_id: int
    role: str
    last_seq: int
    run_pk: int  # the run row: what groups, hubs and renders are keyed by


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
# Reading: one thread with a connection of its own


# Reads run on a thread of their own, off the thread that serves sync HTTP views (so pushing
# to sockets never queues page requests or API writes behind it). Unlike database_sync_to_async,
# which closes the connection after every call (CONN_MAX_AGE=0 by default), this thread keeps its
# connection: a read per broadcast would otherwise open a database connection per broadcast. A
# connection that went bad is dropped and the read retried once on a fresh one.
_render_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="live-render")


def close_render_connection() -> None:
    """Close the render thread's database connection (tests, before the test database goes)."""
    from django.db import connections

    _render_pool.submit(connections.close_all).result()


def _with_connection(fn, *args):
    from django.db import DatabaseError, connection

    try:
        return fn(*args)
    except DatabaseError:
        connection.close()
        return fn(*args)


async def in_render_thread(fn, *args):
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(
        _render_pool, contextvars.copy_context().run, _with_connection, fn, *args
    )


def render_update(sub: Subscription, from_seq: int, upto_seq: int) -> RenderedUpdate:

    return render_fragments(run_pk=sub.run_pk, role=sub.role, after_seq=from_seq, upto_seq=upto_seq)


async def _render(sub: Subscription, from_seq: int, upto_seq: int) -> RenderedUpdate:
    metrics.add("renders")
    metrics.add("catchup_reads")
    return await in_render_thread(render_update, sub, from_seq, upto_seq)


class UpdateCache:
    """Catch-up renders keyed by (run, from, to, role); concurrent misses render once."""

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


def read_batch(
    run_pk: int, workspace_id: int, user_ids: list[int], ranges: Sequence[tuple[int, int]]
) -> tuple[dict[int, str], list[RenderedBatch]]:
    """The hub's one read per committed batch: who may still watch, then the rows and panels of
    `ranges` for the roles they have."""
    roles = allowed_roles(workspace_id, user_ids)
    present = set(roles.values())
    return roles, [render_batch(run_pk=run_pk, roles=present, after_seq=a, upto_seq=b) for a, b in ranges]


# --------------------------------------------------------------------------------------------
# The hub


@dataclass(frozen=True)
class Segment:
    index: int
    batch: RenderedBatch


@dataclass(frozen=True)
class Plan:
    """What a page sends next: ring segments, or a catch-up range read for it."""

    segments: tuple[Segment, ...] = ()
    catchup: tuple[int, int] | None = None
    next_index: int = -1  # the segment the page follows after this (-1: not at a boundary yet)


class RunHub:
    """The one subscription of this process to a run's group, shared by its local sockets.

    A hundred pages open on one run cost one channel-layer delivery and one store read per
    broadcast in this process (not a hundred); each page's sender is then woken directly. Hubs
    live per event loop.
    """

    def __init__(self, run_pk: int | str, loop: asyncio.AbstractEventLoop, workspace_id: int = 0) -> None:
        self.run_pk = run_pk
        self.workspace_id = workspace_id
        self.loop = loop
        self.subscribers: set[Any] = set()
        self.channel: str | None = None
        self.pump: asyncio.Task | None = None
        self.ready = asyncio.Event()
        self.ready_at: float | None = None  # loop time the hub first joined the group
        self.pending: dict | None = None  # notifications merged since the last tick
        self.last_tick = 0.0
        self.tick_handle: asyncio.TimerHandle | None = None
        # the reader (run hubs only)
        self.segments: deque[Segment] = deque()
        self.next_index = 0
        self.read_seq: int | None = None  # every row up to here is in the ring or before it
        self.read_lock = asyncio.Lock()
        self.deliveries: set[asyncio.Future] = set()
        self.background: Tasks = set()  # access re-checks (runs.live.spawn: held, failures logged)
        # messages composed for pages in step: (segment indexes, panel digests) -> the JSON text
        self.composed: OrderedDict[tuple, str] = OrderedDict()
        self.prepared: dict[int, list] = {}  # id(text) -> [text, autobahn PreparedMessage | None]
        # what the pages show of the panels, one shared (never mutated) dict per distinct state, so
        # the pages in step are grouped by identity (`compose`)
        self.digest_states: OrderedDict[tuple, dict[str, str]] = OrderedDict()
        self.flushing: asyncio.Future | None = None  # broadcast sends still going out as ASGI messages
        # the delivery (read, broadcast, drain) under way: notifications meanwhile merge into the next
        self.delivering: asyncio.Future | None = None

    @property
    def reads_store(self) -> bool:
        return isinstance(self.run_pk, int) and bool(self.workspace_id)

    async def add(self, consumer, layer) -> None:
        self.subscribers.add(consumer)
        if self.pump is None:
            self.pump = spawn(self.background, self._pump(layer), what=f"the hub of run #{self.run_pk}")
        await self.ready.wait()  # joined the group: nothing committed from now on is missed

    async def remove(self, consumer) -> None:
        self.subscribers.discard(consumer)
        if not self.subscribers and self.pump is not None:
            _hubs.pop((id(self.loop), self.run_pk), None)
            for delivery in list(self.deliveries):  # nobody left to read for
                delivery.cancel()
            await cancel_all(self.background)  # the pump and any access re-check

    def remember(self, key: tuple, text: str) -> None:
        self.composed[key] = text
        self.prepared[id(text)] = [text, None]  # its websocket frame, framed once on first send
        while len(self.composed) > 32:
            _, old = self.composed.popitem(last=False)
            self.prepared.pop(id(old), None)

    def intern_digests(self, digests: dict[str, str]) -> dict[str, str]:
        """The one shared dict of this panel state (callers replace theirs, never mutate it)."""
        key = tuple(sorted(digests.items()))
        shared = self.digest_states.get(key)
        if shared is None:
            shared = self.digest_states[key] = digests
            while len(self.digest_states) > 64:
                self.digest_states.popitem(last=False)
        else:
            self.digest_states.move_to_end(key)
        return shared

    def compose(
        self, updates: Sequence[RenderedUpdate], digests: dict[str, str], shared: tuple[int, ...] | None
    ) -> tuple[str, dict[str, str], bool]:
        """`updates` as one message for a page that shows the panels of `digests`: their rows, then the
        latest version of each panel that changed for it; the page's panel state after it; whether the
        text was composed before.
        Messages of ring segments (`shared`: their indexes) are kept in `composed`, so pages in step
        that need the same panels get the very same text (and frame). The CSRF placeholder of a
        form is left in: the page's own token replaces it (never in a broadcast)."""
        latest = {panel.name: panel for u in updates for panel in u.panels}
        needed = [panel for panel in latest.values() if digests.get(panel.name) != panel.digest]
        if needed:
            digests = self.intern_digests({**digests, **{panel.name: panel.digest for panel in needed}})
        key = None
        if shared is not None:
            key = (shared, tuple(panel.digest for panel in needed))
            text = self.composed.get(key)
            if text is not None:
                return text, digests, True
        parts = []
        for u in updates:
            parts += [f.encoded for f in (u.rows, u.spans) if f is not None]
        parts += [panel.encoded for panel in needed]
        status = wire_json(updates[-1].status).decode()
        text = (
            f'{{"type":"update","from_seq":{updates[0].after_seq},"last_seq":{updates[-1].upto_seq},'
            f'"status":{status},"sent_at":{time.time():.4f},"html":"{"".join(parts)}"}}'
        )
        if key is not None:
            self.remember(key, text)
        return text, digests, False

    def note_head(self, head: int) -> None:
        """A page read the run's head after the hub joined the group: the ring starts there."""
        if self.read_seq is None:
            self.read_seq = head

    def request(self, seq: int) -> None:
        """A page knows of rows the hub has not read (its own head read): read up to `seq`."""
        if self.read_seq is not None and seq > self.read_seq:
            self._merge({"type": "run.changed", "run_pk": self.run_pk, "first_seq": 0, "last_seq": seq})
            self._schedule()

    async def _pump(self, layer) -> None:
        group = run_group(self.run_pk)
        access = access_group(self.workspace_id)
        first = True
        while True:
            try:
                self.channel = await layer.new_channel()  # default prefix: channels_redis shares one reader
                await layer.group_add(group, self.channel)
                if self.workspace_id:
                    await layer.group_add(access, self.channel)
                self.ready.set()
                if self.ready_at is None:
                    self.ready_at = self.loop.time()
                if not first:
                    # Notifications may have been lost while the layer was away: ask the store.
                    head = await database_sync_to_async(current_last_seq)(self.run_pk)
                    if head is not None:
                        self._merge(
                            {"type": "run.changed", "run_pk": self.run_pk, "first_seq": 0, "last_seq": head}
                        )
                        self._schedule()
                first = False
                while True:
                    message = await layer.receive(self.channel)
                    if message.get("type") == "access.changed":
                        spawn(
                            self.background, self.recheck(), what=f"an access re-check of run #{self.run_pk}"
                        )
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
        metrics.add("hub_merges")
        first = int(message.get("first_seq") or 0)
        if first and (not pending.get("first_seq") or first < pending["first_seq"]):
            pending["first_seq"] = first
        pending["last_seq"] = max(int(pending.get("last_seq") or 0), int(message.get("last_seq") or 0))
        if message.get("status") and pending.get("status") != "deleted":
            pending["status"] = message["status"]

    def _schedule(self) -> None:
        """Wake the local pages at most once per LIVE_MIN_UPDATE_SECONDS, all at the same moment, and
        never while the previous delivery is under way (`_tick`)."""
        if self.tick_handle is not None or self.delivering is not None:
            return
        spacing = setting("LIVE_MIN_UPDATE_SECONDS", 0.05)
        wait = self.last_tick + spacing - self.loop.time()
        if wait <= 0 or (self.pending or {}).get("status") == "deleted":
            self._tick()
        else:
            self.tick_handle = self.loop.call_later(wait, self._tick)

    def _tick(self) -> None:
        """Start a delivery of what was announced since the last one. One at a time: while a delivery
        reads, broadcasts and waits for its frames to leave (`_drain`), later notifications merge into
        `pending` and go as one read and one update per page when it ends. A process that falls behind
        (a slow read, a loop busy with other work, sockets that do not drain) thus sends fewer, larger
        updates instead of queueing one per commit; one that keeps up sends one per commit as before."""
        self.tick_handle = None
        if self.delivering is not None:
            return  # `_delivered` schedules the next one
        self.last_tick = self.loop.time()
        message, self.pending = self.pending, None
        if message is None:
            return
        delivery = asyncio.ensure_future(self._deliver(message))
        self.delivering = delivery
        self.deliveries.add(delivery)
        delivery.add_done_callback(self._delivered)

    def _delivered(self, delivery: asyncio.Future) -> None:
        self.deliveries.discard(delivery)
        if not delivery.cancelled() and delivery.exception() is not None:
            log.error("live: a delivery of run #%s failed", self.run_pk, exc_info=delivery.exception())
        if self.delivering is delivery:
            self.delivering = None
        if self.pending is not None and self.subscribers and not delivery.cancelled():
            self._schedule()

    async def _deliver(self, message: dict) -> None:
        new: list[Segment] = []
        if self.reads_store and message.get("status") != "deleted":
            read = await self._read(message)
            if read is None:
                return
            new = read
        else:
            # Authorization is not only at connect: who may still watch is asked again (one query
            # for every page of this run in this process) before anything new is pushed.
            await self.recheck()
        rest: list = list(self.subscribers)
        unframed: list[tuple[Any, str]] = []
        behind: list = []
        if new:
            rest, unframed, behind = self._broadcast(new, message)
        for consumer in rest:
            consumer.on_change(message)
        if unframed:
            await self._flush(unframed)
        await self._drain(behind)

    async def _drain(self, behind: list) -> None:
        """The end of a delivery: one loop turn (what queued behind the broadcast, other sockets' acks
        and writes, runs before the next read), then, while frames of this broadcast are still in
        their transports' buffers (a socket the kernel would not take them for), short waits up to
        LIVE_DRAIN_SECONDS. The next delivery then carries everything announced meanwhile."""
        loop = self.loop
        started = loop.time()
        await asyncio.sleep(0)
        if loop.time() - started > setting("LIVE_LAG_SECONDS", 0.01):
            metrics.add("lagged_deliveries")
        cap = started + setting("LIVE_DRAIN_SECONDS", 0.05)
        if behind:
            metrics.add("drain_waits")
        while behind and loop.time() < cap:
            await asyncio.sleep(0.005)
            behind = [consumer for consumer in behind if not consumer.closing and consumer.backlog()]

    # -- the broadcast
    def _broadcast(self, new: list[Segment], message: dict) -> tuple[list, list, list]:
        """Send the segments just read to every page in step, from here, in one loop per message of at
        most LIVE_MAX_ROWS_PER_UPDATE rows (nothing awaits between checking a page and sending to it).
        Returns the pages left to their own senders, (page, text) pairs that could not go as a
        prepared frame (not under daphne), and the pages whose frame is still (partly) in daphne's
        transport buffer."""
        max_rows = max(1, int(setting("LIVE_MAX_ROWS_PER_UPDATE", 200)))
        chunks: list[list[Segment]] = [[]]
        rows = 0
        for segment in new:  # each segment has at most max_rows rows (`_read`)
            width = segment.batch.upto_seq - segment.batch.after_seq
            if chunks[-1] and rows + width > max_rows:
                chunks.append([])
                rows = 0
            chunks[-1].append(segment)
            rows += width
        rest: list = list(self.subscribers)
        unframed: list[tuple[Any, str]] = []
        behind: list = []
        announced = int(message.get("first_seq") or 0), int(message.get("last_seq") or 0)
        for n, chunk in enumerate(chunks, 1):
            # a page not in step for one chunk is not for the next either: the last chunk's `rest` is
            # every page that was not sent all of them. Before the last, a page is told of the rows up to
            # the chunk's end only (`took` would otherwise wake its sender for the rest).
            head = announced if n == len(chunks) else (announced[0], chunk[-1].batch.upto_seq)
            rest = self._broadcast_chunk(chunk, head, unframed, behind)
        return rest, unframed, behind

    def _broadcast_chunk(
        self, new: list[Segment], head: tuple[int, int], unframed: list, behind: list
    ) -> list:
        first, last = new[0], new[-1]
        rows = last.batch.upto_seq - first.batch.after_seq
        max_inflight = int(setting("LIVE_MAX_INFLIGHT", 8))
        groups: dict[tuple[int, str], list] = {}
        rest: list = []
        for consumer in self.subscribers:
            if consumer.in_step(first.index, first.batch.after_seq, max_inflight):
                # pages that show the same panels share their digests dict (`intern_digests`)
                groups.setdefault((id(consumer.panel_digests), consumer.sub.role), []).append(consumer)
            else:
                rest.append(consumer)
        shared = tuple(segment.index for segment in new)
        served = framed = texts = 0  # texts: composed here (the others were composed before)
        buffered = len(behind)
        for (_, role), members in groups.items():
            updates = [segment.batch.for_role(role) for segment in new]
            if any(u is None for u in updates):  # a role the read did not render for
                rest += members
                continue
            text, digests, reused = self.compose(updates, members[0].panel_digests, shared)  # type: ignore[arg-type]
            if CSRF_PLACEHOLDER in text:  # a form: each page sends it with its own CSRF token
                rest += members
                continue
            entry = self.prepared[id(text)]
            for consumer in members:
                consumer.took(last.batch.upto_seq, last.index + 1, digests, head)
                if not consumer.send_frame(entry):
                    unframed.append((consumer, text))
                    continue
                framed += 1
                if consumer.buffered:
                    behind.append(consumer)
            served += len(members)
            texts += 0 if reused else 1
        if served:
            metrics.add("hub_broadcasts")
            metrics.add("broadcast_sends", served)
            metrics.add("updates_sent", served)
            metrics.add("rows_sent", served * rows)
            metrics.add("shared_sends", served - texts)
            if framed:
                buffered = len(behind) - buffered
                metrics.add("prepared_sends", framed)
                metrics.add("direct_writes", framed - buffered)
                if buffered:
                    metrics.add("buffered_writes", buffered)
        return rest

    async def _flush(self, unframed: list[tuple[Any, str]]) -> None:
        """Broadcast texts for pages not under daphne, as ASGI messages, in order: after the previous
        broadcast's, and before the pages' own senders send anything (they wait for `flushing`)."""
        previous = self.flushing
        done = self.loop.create_future()
        self.flushing = done
        try:
            if previous is not None:
                await asyncio.shield(previous)
            for consumer, text in unframed:
                if not consumer.closing:
                    try:
                        await consumer.send(text_data=text)
                    except Exception:
                        log.exception("live: a broadcast send to a page of run #%s failed", self.run_pk)
        finally:
            done.set_result(None)
            if self.flushing is done:
                self.flushing = None

    # -- the reader
    async def _read(self, message: dict) -> list[Segment] | None:
        """Read what `message` announces into the ring; the new segments (None: the read failed)."""
        async with self.read_lock:
            subscribers = [c for c in self.subscribers if getattr(c, "sub", None) is not None]
            if self.read_seq is None or not subscribers:
                return []  # the pages read the head after this commit: nothing to read for them
            last = int(message.get("last_seq") or 0)
            start = self.read_seq
            step = max(1, int(setting("LIVE_MAX_ROWS_PER_UPDATE", 200)))
            ranges = [(a, min(last, a + step)) for a in range(start, last, step)]
            if not ranges and message.get("status"):
                ranges = [(start, start)]  # a projection-only change: the panels again
            users = sorted({c.user_pk for c in subscribers})
            if ranges or users:
                try:
                    roles, batches = await in_render_thread(
                        read_batch, self.run_pk, self.workspace_id, users, ranges
                    )
                except Exception:  # e.g. the run was deleted meanwhile: the pages reconnect and see
                    metrics.add("read_errors")
                    log.exception("live: reading run #%s %s..%s failed", self.run_pk, start, last)
                    for consumer in subscribers:
                        await consumer.drop("error")
                    return None
                metrics.add("batch_reads")
                metrics.add("renders", len(batches))
                await self._apply_roles(subscribers, roles)
                keep = max(1, int(setting("LIVE_HUB_SEGMENTS", 64)))
                new = []
                for batch in batches:
                    new.append(Segment(self.next_index, batch))
                    self.next_index += 1
                    self.read_seq = batch.upto_seq
                self.segments.extend(new)
                while len(self.segments) > keep:
                    self.segments.popleft()
                return new
            return []

    def plan(self, sent_seq: int, index: int, max_rows: int) -> Plan | None:
        """What a page at `sent_seq` (following segment `index`) sends next; None: wait for the hub."""
        ring = self.segments
        first = ring[0].index if ring else self.next_index
        start = None
        if first <= index < self.next_index and ring[index - first].batch.after_seq == sent_seq:
            start = index - first
        else:
            for i, seg in enumerate(ring):
                if seg.index < index:  # already sent (index -1: the page's place is not known)
                    continue
                b = seg.batch
                if b.after_seq == sent_seq:
                    start = i
                    break
                if b.after_seq < sent_seq < b.upto_seq:  # mid-segment: catch up to its end
                    return Plan(catchup=(sent_seq, b.upto_seq), next_index=seg.index + 1)
        if start is not None:
            taken = [ring[start]]
            rows = ring[start].batch.upto_seq - ring[start].batch.after_seq
            for seg in list(ring)[start + 1 :]:
                rows += seg.batch.upto_seq - seg.batch.after_seq
                if rows > max_rows:
                    break
                taken.append(seg)
            return Plan(segments=tuple(taken), next_index=taken[-1].index + 1)
        if self.read_seq is None:
            return None
        boundary = ring[0].batch.after_seq if ring else self.read_seq
        if sent_seq < boundary:  # older than the ring: read for this page (shared by its peers)
            upto = min(boundary, sent_seq + max_rows)
            return Plan(catchup=(sent_seq, upto), next_index=first if upto == boundary else -1)
        if sent_seq == self.read_seq and index != self.next_index:
            return Plan(next_index=self.next_index)  # at the head: follow from the next segment
        return None

    async def _apply_roles(self, subscribers: list, roles: dict[int, str]) -> None:
        for consumer in subscribers:
            role = roles.get(consumer.user_pk)
            if role is None:
                await consumer.revoke()
            elif role != consumer.sub.role:
                consumer.sub = dataclasses.replace(consumer.sub, role=role)
                consumer.panel_digests = {}

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
        await self._apply_roles(subscribers, roles)


_hubs: dict[tuple[int, int | str], RunHub] = {}


def hub_for(run_pk: int | str, workspace_id: int = 0) -> RunHub:
    loop = asyncio.get_running_loop()
    key = (id(loop), run_pk)
    hub = _hubs.get(key)
    if hub is None or hub.loop is not loop:
        hub = _hubs[key] = RunHub(run_pk, loop, workspace_id)
    return hub
