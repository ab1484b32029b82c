"""Run and workspace websocket consumers on the in-memory layer and on Redis.

Every test opens real sockets through the project's ASGI application (origin validator, session
auth, URL router) and writes through the actions, so commit -> notify -> publisher -> layer ->
consumer -> rendered partials is exercised end to end.
"""

from __future__ import annotations

import asyncio
import re
import uuid

import orjson
import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import override_settings

from tests.live.conftest import ORIGIN, session_cookie

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


def application():
    from workbench.asgi import application

    return application


async def open_socket(path: str, user=None, *, origin=ORIGIN, last_seq: int | None = None):
    headers = [origin] if origin else []
    if user is not None:
        headers.append((b"cookie", await database_sync_to_async(session_cookie)(user)))
    if last_seq is not None:
        path = f"{path}?last_seq={last_seq}"
    comm = WebsocketCommunicator(application(), path, headers=headers)
    connected, code = await comm.connect(timeout=5)
    return comm, connected, code


async def receive(comm, timeout: float = 5.0) -> dict:
    return orjson.loads(await comm.receive_from(timeout=timeout))


async def collect_until(comm, last_seq: int, *, ack: bool = True, timeout: float = 10.0) -> list[dict]:
    """Updates until one reaches `last_seq`; checks they are contiguous; acks each one."""
    updates: list[dict] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not updates or updates[-1]["last_seq"] < last_seq:
        message = await receive(comm, timeout=max(0.1, deadline - loop.time()))
        # the server ends the page (a resync, a revoke): say why rather than fail on the close after it
        assert message["type"] not in ("resync", "revoked", "gone"), message
        if message["type"] != "update":
            continue
        if updates:
            assert message["from_seq"] == updates[-1]["last_seq"], "updates must be contiguous"
        updates.append(message)
        if ack:
            await comm.send_to(text_data=orjson.dumps({"type": "ack", "seq": message["last_seq"]}).decode())
    return updates


async def settle(comm, quiet: float = 0.3) -> None:
    """Let earlier broadcasts (the run's start) arrive and discard them."""
    while not await comm.receive_nothing(timeout=quiet):
        message = await receive(comm)
        if message["type"] == "update":
            await comm.send_to(text_data=orjson.dumps({"type": "ack", "seq": message["last_seq"]}).decode())


def seqs_in(updates: list[dict]) -> list[int]:
    return [int(s) for u in updates for s in re.findall(r'data-seq="(\d+)"', u["html"])]


@database_sync_to_async
def start_run(workspace, workflow, run_id="run_live"):
    from runs import actions

    return actions.do_start_run(
        workspace=workspace, workflow=workflow, actor="user:alice", run_id=run_id
    ).run_id


@database_sync_to_async
def annotate(workspace, run_id, n=1, text="note"):
    from runs import actions
    from runs.engine import commands as cmd

    last = 0
    for i in range(n):
        last = actions.do_command(
            workspace=workspace, run_id=run_id, command=cmd.Annotate(text=f"{text} {i}"), actor="token:w"
        ).last_seq
    return last


async def test_member_gets_rows_and_panels(channel_layer_kind, workspace, alice, workflow):
    from runs import actions
    from runs.engine import commands as cmd

    run_id = await start_run(workspace, workflow)
    comm, connected, _ = await open_socket(f"/ws/runs/{run_id}/", alice, last_seq=0)
    assert connected
    hello = await receive(comm)
    assert hello == {"type": "hello", "run_id": run_id, "last_seq": 0, "from_seq": 0}
    await database_sync_to_async(actions.do_command)(
        workspace=workspace, run_id=run_id, command=cmd.BeginStep("parse"), actor="token:w"
    )
    last = await annotate(workspace, run_id, 3, text="hello-live")
    updates = await collect_until(comm, last)
    assert updates[0]["from_seq"] == 0
    assert seqs_in(updates) == [1, 2, 3, 4]
    html = "".join(u["html"] for u in updates)
    assert "hello-live 2" in html
    assert 'hx-swap-oob="beforeend:#timeline-list"' in html
    for panel_id in ("run-status", "gate-panel", "graph", "ledger-totals"):
        assert f'id="{panel_id}"' in updates[0]["html"], panel_id  # a step started: every panel comes
    # Annotations change no panel: later updates carry only rows.
    last = await annotate(workspace, run_id, 1, text="rows-only")
    later = await collect_until(comm, last)
    assert "rows-only" in later[-1]["html"] and 'id="graph"' not in later[-1]["html"]
    await comm.disconnect()


async def test_gate_panel_changes_when_gate_requested_and_resolved(
    channel_layer_kind, workspace, bob, workflow
):
    from runs import actions
    from runs.engine import commands as cmd

    run_id = await start_run(workspace, workflow)
    comm, connected, _ = await open_socket(f"/ws/runs/{run_id}/", bob, last_seq=0)
    assert connected
    await receive(comm)

    @database_sync_to_async
    def run_cmds(*commands):
        return actions.do_commands(
            workspace=workspace, run_id=run_id, commands=list(commands), actor="user:x"
        ).last_seq

    last = await run_cmds(cmd.BeginStep("parse"), cmd.CompleteStep("parse"), cmd.BeginStep("review"))
    updates = await collect_until(comm, last)
    assert "human_gate_requested" in "".join(u["html"] for u in updates)
    pending_html = updates[-1]["html"]
    last = await run_cmds(cmd.ResolveGate(step_id="review", gate="PAUSE_BEFORE", decision="approved"))
    updates = await collect_until(comm, last)
    assert updates[-1]["html"] != pending_html
    assert "human_gate_resolved" in updates[-1]["html"]
    await comm.disconnect()


async def test_refusals(channel_layer_kind, workspace, alice, charlie, workflow):
    run_id = await start_run(workspace, workflow)
    for user, path in (
        (None, f"/ws/runs/{run_id}/"),  # anonymous
        (charlie, f"/ws/runs/{run_id}/"),  # member of another workspace
        (alice, "/ws/runs/run_does_not_exist/"),
    ):
        comm, connected, _ = await open_socket(path, user)
        assert not connected, (user, path)
        await comm.disconnect()
    comm, connected, _ = await open_socket(
        f"/ws/runs/{run_id}/", alice, origin=(b"origin", b"http://evil.example")
    )
    assert not connected
    await comm.disconnect()
    comm, connected, _ = await open_socket(f"/ws/runs/{run_id}/", alice, origin=None)
    assert not connected
    await comm.disconnect()
    from runs.live.publisher import metrics

    assert metrics.snapshot()["refused"] >= 3


async def test_reconnect_catches_up_from_last_seq(channel_layer_kind, workspace, alice, workflow):
    from runs.live.publisher import metrics

    run_id = await start_run(workspace, workflow)
    last = await annotate(workspace, run_id, 7)
    comm, connected, _ = await open_socket(f"/ws/runs/{run_id}/", alice, last_seq=4)
    assert connected
    hello = await receive(comm)
    assert (hello["from_seq"], hello["last_seq"]) == (4, 7)
    updates = await collect_until(comm, last)
    assert seqs_in(updates) == [5, 6, 7]
    assert metrics.snapshot()["resyncs"] >= 1
    await settle(comm)
    # The client reports it lost rows (a gap on its side): everything after its seq comes again.
    await comm.send_to(text_data='{"type": "resync", "after_seq": 2}')
    updates = await collect_until(comm, last)
    assert seqs_in(updates) == [3, 4, 5, 6, 7]
    await comm.disconnect()


async def test_lost_notification_is_recovered_from_the_store(channel_layer_kind, workspace, alice, workflow):
    """Commits whose broadcast never arrives are still delivered with the next one, in order."""
    from runs.actions.notify import register_listener, unregister_listener
    from runs.live.publisher import metrics, on_run_change

    run_id = await start_run(workspace, workflow)
    comm, connected, _ = await open_socket(f"/ws/runs/{run_id}/", alice, last_seq=0)
    assert connected
    await receive(comm)
    await settle(comm)
    unregister_listener(on_run_change)
    try:
        await annotate(workspace, run_id, 3, text="silent")
    finally:
        register_listener(on_run_change)
    assert await comm.receive_nothing(timeout=0.2)
    last = await annotate(workspace, run_id, 1, text="loud")
    updates = await collect_until(comm, last)
    assert seqs_in(updates) == [1, 2, 3, 4]
    assert metrics.snapshot()["gaps"] >= 1
    await comm.disconnect()


async def test_slow_subscriber_is_dropped_and_told_to_resync(channel_layer_kind, workspace, alice, workflow):
    from runs.live.publisher import metrics

    run_id = await start_run(workspace, workflow)
    with override_settings(
        LIVE_MAX_INFLIGHT=2,
        LIVE_ACK_TIMEOUT_SECONDS=0.5,
        LIVE_COALESCE_SECONDS=0.0,
        LIVE_MIN_UPDATE_SECONDS=0.0,
    ):
        slow, connected, _ = await open_socket(f"/ws/runs/{run_id}/", alice, last_seq=0)
        assert connected
        fast, connected, _ = await open_socket(f"/ws/runs/{run_id}/", alice, last_seq=0)
        assert connected
        await receive(slow)
        await receive(fast)
        loop = asyncio.get_running_loop()
        writes_took = 0.0
        fast_updates: list[dict] = []
        for _ in range(6):
            started = loop.time()
            last = await annotate(workspace, run_id, 1)
            writes_took += loop.time() - started
            # a client that keeps up; waiting for it also makes each commit its own update (a cold
            # first render would otherwise let the hub merge the next ones into one)
            fast_updates += await collect_until(fast, last)
        assert last == 6
        assert seqs_in(fast_updates) == list(range(1, last + 1))
        # The slow one never acked: at most 2 updates in flight, then a resync notice and close 4000.
        received = []
        while True:
            message = await receive(slow, timeout=3)
            received.append(message)
            if message["type"] == "resync":
                break
        assert [m["type"] for m in received].count("update") <= 2
        assert received[-1] == {"type": "resync", "reason": "slow", "after_seq": 0}
        assert (await slow.receive_output(timeout=3))["code"] == 4000
        assert metrics.snapshot()["drops"] == 1
        assert writes_took < 3  # the writer never waited for the slow subscriber
        await fast.disconnect()
        # It comes back with its seq and gets everything.
        again, connected, _ = await open_socket(f"/ws/runs/{run_id}/", alice, last_seq=0)
        assert connected
        await receive(again)
        assert seqs_in(await collect_until(again, last)) == list(range(1, last + 1))
        await again.disconnect()


async def test_a_page_quiet_for_longer_than_the_ack_timeout_is_not_dropped_when_it_acks_in_time(
    channel_layer_kind, workspace, alice, workflow
):
    """The ack timeout counts from the oldest update the page has not acked, not from its last ack:
    a page that watched a quiet run for longer than the timeout, then takes a full window and acks
    it well within the timeout, keeps its socket (it used to get 50 ms and be dropped as slow)."""
    from runs.live.publisher import metrics

    run_id = await start_run(workspace, workflow)
    with override_settings(
        LIVE_MAX_INFLIGHT=1,
        LIVE_ACK_TIMEOUT_SECONDS=1.0,
        LIVE_COALESCE_SECONDS=0.0,
        LIVE_MIN_UPDATE_SECONDS=0.0,
    ):
        comm, connected, _ = await open_socket(f"/ws/runs/{run_id}/", alice, last_seq=0)
        assert connected
        await receive(comm)
        await settle(comm, quiet=0.1)
        await asyncio.sleep(1.3)  # quiet: longer than the timeout since the page's last ack
        drops = metrics.snapshot()["drops"]
        first = await annotate(workspace, run_id, 1, text="one")
        update = await receive(comm)  # the window (1) is now full: not acked yet
        assert update["type"] == "update" and update["last_seq"] == first
        last = await annotate(workspace, run_id, 1, text="two")  # waits for that ack
        await asyncio.sleep(0.3)  # a page busy for a moment, well within the timeout
        await comm.send_to(text_data=orjson.dumps({"type": "ack", "seq": first}).decode())
        assert seqs_in(await collect_until(comm, last)) == [last]
        assert metrics.snapshot()["drops"] == drops
        await comm.disconnect()


async def test_an_ack_read_while_its_update_is_still_being_sent_is_kept(
    channel_layer_kind, workspace, alice, workflow, monkeypatch
):
    """The page's ack can be read before the sender's `send` returns (the send yields; the page is
    quick). That ack used to be cut to the seq sent before it and lost: with a window of 1 the page
    then got nothing more and was dropped as slow at the ack timeout, though it had acked at once."""
    from runs.live.consumers import RunLiveConsumer
    from runs.live.publisher import metrics

    original = RunLiveConsumer.send

    async def send_then_yield(self, text_data=None, bytes_data=None, close=False):
        await original(self, text_data=text_data, bytes_data=bytes_data, close=close)
        if text_data and '"type":"update"' in text_data:
            await asyncio.sleep(0.2)  # the page reads the update and acks it meanwhile

    monkeypatch.setattr(RunLiveConsumer, "send", send_then_yield)
    run_id = await start_run(workspace, workflow)
    head = await annotate(workspace, run_id, 1, text="before")  # the page catches up: its own sender
    with override_settings(
        LIVE_MAX_INFLIGHT=1,
        LIVE_ACK_TIMEOUT_SECONDS=1.0,
        LIVE_COALESCE_SECONDS=0.0,
        LIVE_MIN_UPDATE_SECONDS=0.0,
    ):
        comm, connected, _ = await open_socket(f"/ws/runs/{run_id}/", alice, last_seq=0)
        assert connected
        assert (await receive(comm))["type"] == "hello"
        drops = metrics.snapshot()["drops"]
        caught_up = await collect_until(comm, head)  # acked as soon as read, inside the send
        assert caught_up[-1]["last_seq"] == head
        last = await annotate(workspace, run_id, 2, text="after")
        assert seqs_in(await collect_until(comm, last, timeout=3.0)) == list(range(head + 1, last + 1))
        assert metrics.snapshot()["drops"] == drops
        await comm.disconnect()


async def test_an_update_of_panels_only_is_acked_and_leaves_the_window(
    channel_layer_kind, workspace, alice, workflow
):
    """A change with no new rows (a status change the page hears after it read the head: e.g. the
    run's start, announced late) goes out as an update that ends at the seq the page had acked
    already. Its ack names that same seq; it used to be ignored, so the update held a slot of the
    window for good: with a window of 1 the page got nothing more and was dropped as slow at the
    ack timeout (the flake of test_fanout and test_hub_broadcast under load)."""
    from channels.layers import get_channel_layer

    from runs.live.publisher import metrics, run_group
    from runs.models import Run

    run_id = await start_run(workspace, workflow)
    head = await annotate(workspace, run_id, 1, text="before")
    run_pk = await database_sync_to_async(lambda: Run.unscoped.get(workspace=workspace, run_id=run_id).pk)()
    with override_settings(
        LIVE_MAX_INFLIGHT=1,
        LIVE_ACK_TIMEOUT_SECONDS=1.0,
        LIVE_COALESCE_SECONDS=0.0,
        LIVE_MIN_UPDATE_SECONDS=0.0,
    ):
        comm, connected, _ = await open_socket(f"/ws/runs/{run_id}/", alice)  # at the head: in step
        assert connected
        assert (await receive(comm))["from_seq"] == head
        await settle(comm)
        drops = metrics.snapshot()["drops"]
        panels_only = {
            "type": "run.changed",
            "run_id": run_id,
            "run_pk": run_pk,
            "workspace_id": workspace.pk,
            "first_seq": head,
            "last_seq": head,
            "status": "running",
        }
        await get_channel_layer().group_send(run_group(run_pk), panels_only)
        update = await receive(comm)
        assert update["type"] == "update" and update["from_seq"] == update["last_seq"] == head
        await comm.send_to(text_data=orjson.dumps({"type": "ack", "seq": head}).decode())
        await asyncio.sleep(0.05)
        last = await annotate(workspace, run_id, 2, text="after")
        assert seqs_in(await collect_until(comm, last, timeout=3.0)) == [head + 1, head + 2]
        assert metrics.snapshot()["drops"] == drops
        await comm.disconnect()


async def test_bursts_are_coalesced(channel_layer_kind, workspace, alice, workflow):
    from runs.live.publisher import metrics

    run_id = await start_run(workspace, workflow)
    with override_settings(LIVE_COALESCE_SECONDS=0.2):
        comm, connected, _ = await open_socket(f"/ws/runs/{run_id}/", alice, last_seq=0)
        assert connected
        await receive(comm)
        last = await annotate(workspace, run_id, 40)
        updates = await collect_until(comm, last)
        assert seqs_in(updates) == list(range(1, 41))
        counters = metrics.snapshot()
        assert counters["changes"] >= 40
        assert counters["broadcasts"] < 20 and counters["coalesced"] > 20
        assert len(updates) < 20
        await comm.disconnect()


async def test_workspace_socket_hears_about_runs(channel_layer_kind, workspace, alice, charlie, workflow):
    comm, connected, _ = await open_socket("/ws/workspace/", alice)
    assert connected
    outsider, connected, _ = await open_socket("/ws/workspace/", charlie)
    assert connected
    run_id = await start_run(workspace, workflow, run_id="run_ws")
    message = await receive(comm)
    assert message["type"] == "run.changed" and message["run_id"] == run_id and message["status"] == "running"
    last = await annotate(workspace, run_id, 2)
    message = await receive(comm)
    while message["last_seq"] < last:
        message = await receive(comm)
    assert await outsider.receive_nothing(timeout=0.3)  # other workspace hears nothing
    await comm.disconnect()
    await outsider.disconnect()
    anonymous, connected, _ = await open_socket("/ws/workspace/", None)
    assert not connected
    await anonymous.disconnect()


async def test_deleted_run_closes_the_socket(channel_layer_kind, workspace, alice, workflow):
    from runs import actions

    run_id = await start_run(workspace, workflow)
    comm, connected, _ = await open_socket(f"/ws/runs/{run_id}/", alice)
    assert connected
    await receive(comm)
    await settle(comm)
    await database_sync_to_async(actions.do_delete_run)(workspace=workspace, run_id=run_id)
    assert await receive(comm) == {"type": "gone"}
    assert (await comm.receive_output(timeout=3))["code"] == 4404


async def test_hub_rejoins_after_the_layer_connection_dies(channel_layer_kind, workspace, alice, workflow):
    """Redis drops our connections: the run's hub rejoins and catches up from the store. (On a Redis
    database of its own: cutting every connection of the shared one cut the tests beside it too.)"""
    if channel_layer_kind != "redis":
        pytest.skip("only the Redis layer has a connection to lose")
    import redis

    from runs.live.publisher import metrics
    from tests.live.conftest import REDIS_CUT_DB, layer_settings, redis_url

    with override_settings(
        CHANNEL_LAYERS=layer_settings("redis", f"wbcut{uuid.uuid4().hex[:8]}", REDIS_CUT_DB)
    ):
        run_id = await start_run(workspace, workflow)
        comm, connected, _ = await open_socket(f"/ws/runs/{run_id}/", alice, last_seq=0)
        assert connected
        await receive(comm)
        await settle(comm)
        admin = redis.Redis.from_url(redis_url(REDIS_CUT_DB))
        ours = [
            c["id"]
            for c in admin.client_list()
            if int(c.get("db", -1)) == REDIS_CUT_DB and c["id"] != admin.client_id()
        ]
        assert ours, "the hub holds a Redis connection on the test database"
        for client_id in ours:
            admin.client_kill_filter(_id=client_id)
        last = await annotate(workspace, run_id, 2, text="after the cut")
        updates = await collect_until(comm, last, timeout=15)
        assert seqs_in(updates) == [1, 2]
        assert metrics.snapshot()["layer_errors"] >= 1
        await comm.disconnect()
        for key in admin.scan_iter("wbcut*"):
            admin.delete(key)


async def test_idle_sockets_outlive_the_layers_blocking_pop(channel_layer_kind, workspace, alice, workflow):
    """channels_redis waits for a channel's next message with a blocking pop of 5 s, and redis-py 8
    reads with a 5 s socket timeout by default: on an idle channel the read timed out as the pop
    returned (redis/redis-py#4091). A runs list socket closed, a run's hub rejoined (a logged error
    and a read of the store) every ~5 s of quiet. Both stay put now, and still hear the next change."""
    if channel_layer_kind != "redis":
        pytest.skip("only the Redis layer blocks on a socket read")
    from channels_redis.core import RedisChannelLayer

    from runs.live.publisher import metrics

    run_id = await start_run(workspace, workflow, run_id="run_idle")
    page, connected, _ = await open_socket(f"/ws/runs/{run_id}/", alice, last_seq=0)
    assert connected
    await receive(page)
    listing, connected, _ = await open_socket("/ws/workspace/", alice)
    assert connected
    await settle(page)
    errors = metrics.snapshot()["layer_errors"]
    await asyncio.sleep(RedisChannelLayer.brpop_timeout + 1.5)  # quiet past one blocking pop
    assert metrics.snapshot()["layer_errors"] == errors, "the hub lost the layer while idle"
    last = await annotate(workspace, run_id, 1, text="after the quiet")
    assert seqs_in(await collect_until(page, last, timeout=10))[-1] == last
    message = await receive(listing)
    while message.get("last_seq", 0) < last:
        message = await receive(listing)
    assert message["type"] == "run.changed" and message["run_id"] == run_id
    await page.disconnect()
    await listing.disconnect()
