"""Fan-out per process: a committed batch is read from the store once per process, however many
pages watch the run there; pages out of step (reconnects, resyncs) catch up and lose nothing."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from channels.db import database_sync_to_async
from django.test import override_settings

from tests.live.test_consumers import (
    annotate,
    collect_until,
    open_socket,
    receive,
    seqs_in,
    settle,
    start_run,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


class RenderThreadQueries:
    """Counts the SQL the live read thread runs (every per-batch read happens there)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, execute, sql, params, many, context):
        self.count += 1
        return execute(sql, params, many, context)

    def install(self) -> None:
        from django.db import connection

        from runs.live.fanout import _render_pool

        _render_pool.submit(lambda: connection.execute_wrappers.append(self)).result()

    def remove(self) -> None:
        from django.db import connection

        from runs.live.fanout import _render_pool

        _render_pool.submit(lambda: connection.execute_wrappers.remove(self)).result()


@database_sync_to_async
def commit_batch(workspace, run_id: str, n: int = 10, text: str = "batch") -> int:
    """n events in ONE commit."""
    from runs import actions
    from runs.engine import commands as cmd

    return actions.do_commands(
        workspace=workspace,
        run_id=run_id,
        commands=[cmd.Annotate(text=f"{text} {i}") for i in range(n)],
        actor="token:w",
    ).last_seq


async def _open_many(path: str, users: list, last_seq: int) -> list:
    sockets = []
    for user in users:
        comm, connected, _ = await open_socket(path, user, last_seq=last_seq)
        assert connected
        hello = await receive(comm)
        assert hello["type"] == "hello"
        sockets.append(comm)
    return sockets


async def _batch_to_all(workspace, run_id, sockets, text: str) -> tuple[int, list[list[dict]]]:
    last = await commit_batch(workspace, run_id, 10, text)
    got = await asyncio.gather(*(collect_until(c, last) for c in sockets))
    return last, list(got)


async def test_one_store_read_per_commit_batch_whatever_the_subscribers(
    channel_layer_kind, workspace, alice, vera, workflow
):
    from runs.live.publisher import metrics

    run_id = await start_run(workspace, workflow)
    path = f"/ws/runs/{run_id}/"
    queries = RenderThreadQueries()
    with override_settings(LIVE_COALESCE_SECONDS=0.0):
        first = await _open_many(path, [alice], 0)
        await settle(first[0])
        await _batch_to_all(workspace, run_id, first, "warm")  # templates compiled, connection open
        await settle(first[0])
        queries.install()
        try:
            before = metrics.snapshot()
            last, got = await _batch_to_all(workspace, run_id, first, "one")
            one_reads = metrics.snapshot()["batch_reads"] - before["batch_reads"]
            one_queries = queries.count
            # 24 more pages in this process, owners and viewers (two kinds of gate controls)
            others = await _open_many(path, [alice, vera] * 12, last)
            sockets = first + others
            for comm in sockets:
                await settle(comm, quiet=0.1)
            queries.count = 0
            before = metrics.snapshot()
            last, got = await _batch_to_all(workspace, run_id, sockets, "many")
            after = metrics.snapshot()
        finally:
            queries.remove()
    assert one_reads == 1 and one_queries > 0
    assert after["batch_reads"] - before["batch_reads"] == 1  # 25 subscribers, one read
    assert after["catchup_reads"] == before["catchup_reads"]  # nobody read for themselves
    assert queries.count == one_queries, (queries.count, one_queries)  # no query per subscriber
    # the message is composed once for the pages in step, then the same text goes to each of them
    assert after["shared_sends"] - before["shared_sends"] >= len(sockets) - 1
    assert len({updates[-1]["sent_at"] for updates in got}) == 1
    for updates in got:
        assert seqs_in(updates) == list(range(last - 9, last + 1))
        assert "many 9" in updates[-1]["html"]
    for comm in sockets:
        await comm.disconnect()


async def test_panels_are_read_once_for_every_role(channel_layer_kind, workspace, alice, vera, workflow):
    """A batch that changes panels: one read renders the gate panel once per kind of control, and
    each page gets the one for its role."""
    from runs import actions
    from runs.engine import commands as cmd
    from runs.live.publisher import metrics

    run_id = await start_run(workspace, workflow)
    path = f"/ws/runs/{run_id}/"
    owner, viewer = await _open_many(path, [alice, vera], 0)
    for comm in (owner, viewer):
        await settle(comm)
    before = metrics.snapshot()
    last = await database_sync_to_async(
        lambda: (
            actions.do_commands(
                workspace=workspace,
                run_id=run_id,
                commands=[cmd.BeginStep("parse"), cmd.CompleteStep("parse"), cmd.BeginStep("review")],
                actor="user:x",
            ).last_seq
        )
    )()
    owner_updates, viewer_updates = await asyncio.gather(
        collect_until(owner, last), collect_until(viewer, last)
    )
    after = metrics.snapshot()
    assert after["batch_reads"] - before["batch_reads"] <= 2  # the batch (maybe split by the coalescer)
    assert after["catchup_reads"] == before["catchup_reads"]
    owner_html = "".join(u["html"] for u in owner_updates)
    viewer_html = "".join(u["html"] for u in viewer_updates)
    assert 'id="gate-panel"' in owner_html and 'id="gate-panel"' in viewer_html
    assert owner_html != viewer_html  # the owner's gate panel has the controls
    for comm in (owner, viewer):
        await comm.disconnect()


async def test_pages_out_of_step_catch_up_without_gaps(channel_layer_kind, workspace, alice, workflow):
    """Reconnects at various seqs (inside a segment, before the ring, at the head) while batches
    keep coming: every page ends with every row exactly once, in order."""
    from runs.live.publisher import metrics

    run_id = await start_run(workspace, workflow)
    path = f"/ws/runs/{run_id}/"
    with override_settings(LIVE_HUB_SEGMENTS=2, LIVE_COALESCE_SECONDS=0.0):
        steady = (await _open_many(path, [alice], 0))[0]
        last = 0
        for i in range(4):
            last = await commit_batch(workspace, run_id, 10, f"b{i}")
        updates = await collect_until(steady, last)
        assert seqs_in(updates) == list(range(1, last + 1))
        late = []
        for seq in (0, 3, 25, 35, last):  # before the ring, mid-segment, inside the ring, at the head
            comm, connected, _ = await open_socket(path, alice, last_seq=seq)
            assert connected
            assert (await receive(comm))["from_seq"] == seq
            late.append((seq, comm))
        more = await commit_batch(workspace, run_id, 10, "after")
        for seq, comm in late:
            updates = await collect_until(comm, more)
            assert updates[0]["from_seq"] == seq
            assert seqs_in(updates) == list(range(seq + 1, more + 1)), seq
        assert seqs_in(await collect_until(steady, more)) == list(range(last + 1, more + 1))
        assert metrics.snapshot()["catchup_reads"] >= 1
        # A resync request from a page in step: back to the seq it names, then in step again.
        await settle(steady)
        await steady.send_to(text_data=orjson.dumps({"type": "resync", "after_seq": 12}).decode())
        assert seqs_in(await collect_until(steady, more)) == list(range(13, more + 1))
        final = await commit_batch(workspace, run_id, 10, "final")
        assert seqs_in(await collect_until(steady, final)) == list(range(more + 1, final + 1))
        for _, comm in late:
            await comm.disconnect()
        await steady.disconnect()


async def test_a_page_far_behind_the_ring_reads_for_itself_and_rejoins(
    channel_layer_kind, workspace, alice, workflow
):
    """A page that acks nothing while many batches pass falls out of the hub's ring; once it acks it
    catches up from the store and follows the ring again, without a gap."""
    run_id = await start_run(workspace, workflow)
    path = f"/ws/runs/{run_id}/"
    with override_settings(
        LIVE_HUB_SEGMENTS=2, LIVE_MAX_INFLIGHT=1, LIVE_COALESCE_SECONDS=0.0, LIVE_MIN_UPDATE_SECONDS=0.0
    ):
        lagging = (await _open_many(path, [alice], 0))[0]
        last = 0
        for i in range(6):
            last = await commit_batch(workspace, run_id, 5, f"lag{i}")
            await asyncio.sleep(0.05)
        updates = await collect_until(lagging, last)  # acks one at a time: in flight 1
        assert seqs_in(updates) == list(range(1, last + 1))
        more = await annotate(workspace, run_id, 2, text="then")
        assert seqs_in(await collect_until(lagging, more)) == [last + 1, last + 2]
        await lagging.disconnect()
