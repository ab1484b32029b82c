"""A run hub that falls behind sends fewer, larger updates (runs.live.fanout.RunHub._tick): one
delivery (read, broadcast, drain) at a time, the notifications that arrive meanwhile merged into the
next one; every page still gets every row once, in order, with contiguous seq ranges. A notification
of rows the hub has read and sent already wakes no page's sender."""

from __future__ import annotations

import asyncio
import threading

import pytest
from channels.layers import get_channel_layer
from django.test import override_settings

from tests.live.test_consumers import collect_until, seqs_in, start_run
from tests.live.test_fanout import commit_batch
from tests.live.test_hub_broadcast import delta, open_in_step, warm

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


class HeldRead:
    """Blocks the hub's next store read (in its render thread) until released."""

    def __init__(self, monkeypatch) -> None:
        from runs.live import fanout

        self.armed = threading.Event()
        self.entered = threading.Event()
        self.release = threading.Event()
        real = fanout.read_batch

        def read_batch(*args):
            if self.armed.is_set():
                self.armed.clear()
                self.entered.set()
                self.release.wait(30)
            return real(*args)

        monkeypatch.setattr(fanout, "read_batch", read_batch)

    async def wait_entered(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.entered.wait, 30)


async def until_pending(hub, last_seq: int) -> None:
    """Until the hub has merged the notification of `last_seq` (a wait, not a timed assertion)."""
    for _ in range(1000):
        if (hub.pending or {}).get("last_seq", 0) >= last_seq:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no notification of seq {last_seq} reached the hub: {hub.pending}")


async def behind_by_two_commits(monkeypatch, workspace, run_id, sockets) -> tuple[int, int, int]:
    """A first batch whose read is held while two more commit: returns the three batches' last seqs."""
    held = HeldRead(monkeypatch)
    held.armed.set()
    b1 = await commit_batch(workspace, run_id, 10, "held")
    await held.wait_entered()
    b2 = await commit_batch(workspace, run_id, 10, "meanwhile-a")
    b3 = await commit_batch(workspace, run_id, 10, "meanwhile-b")
    hub = this_loops_hub()
    await until_pending(hub, b3)
    assert hub.delivering is not None  # the held delivery: the two commits wait for it, merged
    held.release.set()
    return b1, b2, b3


def this_loops_hub():
    from runs.live.fanout import _hubs

    (hub,) = [h for h in _hubs.values() if h.loop is asyncio.get_running_loop()]
    return hub


async def test_commits_announced_during_a_delivery_go_as_one_update(
    channel_layer_kind, workspace, alice, vera, workflow, monkeypatch
):
    from runs.live.publisher import metrics

    run_id = await start_run(workspace, workflow)
    path = f"/ws/runs/{run_id}/"
    with override_settings(LIVE_COALESCE_SECONDS=0.0, LIVE_MIN_UPDATE_SECONDS=0.0):
        sockets = await open_in_step(path, [alice, vera] * 3)
        start = await warm(workspace, run_id, sockets)
        before = metrics.snapshot()
        b1, b2, b3 = await behind_by_two_commits(monkeypatch, workspace, run_id, sockets)
        got = await asyncio.gather(*(collect_until(comm, b3) for comm in sockets))
        after = metrics.snapshot()
    for updates in got:
        assert [(u["from_seq"], u["last_seq"]) for u in updates] == [(start, b1), (b1, b3)]
        assert seqs_in(updates) == list(range(start + 1, b3 + 1))
    d = delta(before, after)
    assert d["updates_sent"] == d["broadcast_sends"] == 2 * len(sockets), d  # two updates, not three
    assert d["sender_wakeups"] == 0, d
    assert after["batch_reads"] - before["batch_reads"] == 2  # two reads for three commits
    assert after["hub_merges"] - before["hub_merges"] >= 1
    for comm in sockets:
        await comm.disconnect()


async def test_a_merged_read_wider_than_one_message_is_still_broadcast_in_order(
    channel_layer_kind, workspace, alice, workflow, monkeypatch
):
    """LIVE_MAX_ROWS_PER_UPDATE caps a message: a merged read of more rows goes as several broadcasts
    of at most that many rows, one after the other, still without waking the pages' senders."""
    from runs.live.publisher import metrics

    run_id = await start_run(workspace, workflow)
    path = f"/ws/runs/{run_id}/"
    with override_settings(
        LIVE_COALESCE_SECONDS=0.0, LIVE_MIN_UPDATE_SECONDS=0.0, LIVE_MAX_ROWS_PER_UPDATE=10
    ):
        sockets = await open_in_step(path, [alice] * 4)
        start = await warm(workspace, run_id, sockets)
        before = metrics.snapshot()
        b1, b2, b3 = await behind_by_two_commits(monkeypatch, workspace, run_id, sockets)
        got = await asyncio.gather(*(collect_until(comm, b3) for comm in sockets))
        after = metrics.snapshot()
    for updates in got:
        assert [(u["from_seq"], u["last_seq"]) for u in updates] == [(start, b1), (b1, b2), (b2, b3)]
        assert seqs_in(updates) == list(range(start + 1, b3 + 1))
    d = delta(before, after)
    assert d["broadcast_sends"] == d["updates_sent"] == 3 * len(sockets), d
    assert d["sender_wakeups"] == 0, d
    for comm in sockets:
        await comm.disconnect()


async def test_a_notification_of_rows_already_sent_wakes_no_sender(
    channel_layer_kind, workspace, alice, workflow
):
    """As after a hub rejoined the layer (it asks the store for the head and reads up to it) or a
    notification that arrived twice: nothing new, so no page's sender wakes and nothing is sent."""
    from runs.live.publisher import metrics, run_group

    run_id = await start_run(workspace, workflow)
    path = f"/ws/runs/{run_id}/"
    with override_settings(LIVE_COALESCE_SECONDS=0.0):
        sockets = await open_in_step(path, [alice] * 5)
        last = await warm(workspace, run_id, sockets)
        hub = this_loops_hub()
        before = metrics.snapshot()
        await get_channel_layer().group_send(
            run_group(hub.run_pk),
            {"type": "run.changed", "run_pk": hub.run_pk, "first_seq": 0, "last_seq": last},
        )
        for _ in range(1000):  # until the hub has read (and found nothing new)
            if metrics.snapshot()["batch_reads"] > before["batch_reads"] and hub.delivering is None:
                break
            await asyncio.sleep(0.01)
        after = metrics.snapshot()
        for comm in sockets:
            assert await comm.receive_nothing(timeout=0.1)
    assert after["batch_reads"] - before["batch_reads"] == 1
    d = delta(before, after)
    assert d["sender_wakeups"] == 0 and d["updates_sent"] == 0, d
    for comm in sockets:
        await comm.disconnect()
