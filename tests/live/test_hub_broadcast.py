"""Hub-level broadcast (runs.live.fanout.RunHub._broadcast): a new segment goes from the run's hub to
every page in step in one loop, one composed text (under daphne one prepared frame), without waking
the pages' own senders; pages out of step (catching up, a full ack window, a gate form with their
own CSRF token) take their own path, and lose or repeat nothing."""

from __future__ import annotations

import asyncio
import json

import orjson
import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import override_settings

from tests.live.conftest import ORIGIN, session_cookie
from tests.live.test_access_recheck import remove_member
from tests.live.test_consumers import (
    application,
    collect_until,
    open_socket,
    receive,
    seqs_in,
    settle,
    start_run,
)
from tests.live.test_fanout import commit_batch

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

COUNTERS = ("hub_broadcasts", "broadcast_sends", "sender_wakeups", "updates_sent", "catchup_reads")


def delta(before: dict, after: dict) -> dict:
    return {name: after[name] - before[name] for name in COUNTERS}


async def open_in_step(path: str, users: list, last_seq: int = 0) -> list:
    sockets = []
    for user in users:
        comm, connected, _ = await open_socket(path, user, last_seq=last_seq)
        assert connected
        assert (await receive(comm))["type"] == "hello"
        sockets.append(comm)
    for comm in sockets:
        await settle(comm, quiet=0.1)
    return sockets


async def warm(workspace, run_id: str, sockets: list, text: str = "warm") -> int:
    """One batch to every page (its panels now known), then quiet: the acks are in."""
    last = await commit_batch(workspace, run_id, 10, text)
    await asyncio.gather(*(collect_until(comm, last) for comm in sockets))
    for comm in sockets:
        await settle(comm, quiet=0.1)
    return last


async def test_pages_in_step_get_one_broadcast_and_no_sender_wakes(
    channel_layer_kind, workspace, alice, vera, workflow
):
    from runs.live.publisher import metrics

    run_id = await start_run(workspace, workflow)
    path = f"/ws/runs/{run_id}/"
    with override_settings(LIVE_COALESCE_SECONDS=0.0):
        sockets = await open_in_step(path, [alice, vera] * 6)
        await warm(workspace, run_id, sockets)
        before = metrics.snapshot()
        last = await commit_batch(workspace, run_id, 10, "one")
        got = await asyncio.gather(*(collect_until(comm, last) for comm in sockets))
        after = metrics.snapshot()
    d = delta(before, after)
    assert d["hub_broadcasts"] == 1, d
    assert d["broadcast_sends"] == d["updates_sent"] == len(sockets), d  # every page, by the hub
    assert d["sender_wakeups"] == 0, d  # no page task woke for it
    assert d["catchup_reads"] == 0, d
    texts = {orjson.dumps(updates) for updates in got}
    assert len(texts) == 1  # one text for owners and viewers alike (no panel changed)
    assert seqs_in(got[0]) == list(range(last - 9, last + 1))
    for comm in sockets:
        await comm.disconnect()


async def test_pages_out_of_step_take_their_own_path_without_gap_or_duplicate(
    channel_layer_kind, workspace, alice, workflow
):
    """A page that reconnected from an older seq catches up by itself and then joins the broadcast; a
    page whose ack window is full is left out of it until it acks; neither misses nor repeats a row."""
    from runs.live.publisher import metrics

    run_id = await start_run(workspace, workflow)
    path = f"/ws/runs/{run_id}/"
    with override_settings(LIVE_COALESCE_SECONDS=0.0, LIVE_MAX_INFLIGHT=1, LIVE_HUB_SEGMENTS=2):
        steady = await open_in_step(path, [alice] * 4)
        stalled = (await open_in_step(path, [alice]))[0]
        first = await warm(workspace, run_id, steady + [stalled])
        # `stalled` takes the next update without acking it: its window (1) is then full
        b0 = await commit_batch(workspace, run_id, 10, "b0")
        await asyncio.gather(*(collect_until(comm, b0) for comm in steady))
        assert seqs_in(await collect_until(stalled, b0, ack=False)) == list(range(first + 1, b0 + 1))
        for comm in steady:
            await settle(comm, quiet=0.1)
        late, connected, _ = await open_socket(path, alice, last_seq=3)  # from before the ring
        assert connected
        assert (await receive(late))["from_seq"] == 3
        early = await collect_until(late, b0)
        assert seqs_in(early) == list(range(4, b0 + 1))
        before = metrics.snapshot()
        b1 = await commit_batch(workspace, run_id, 10, "b1")
        await asyncio.gather(*(collect_until(comm, b1) for comm in steady))
        middle = metrics.snapshot()
        assert await stalled.receive_nothing(timeout=0.3)  # nothing until it acks
        await stalled.send_to(text_data=orjson.dumps({"type": "ack", "seq": b0}).decode())
        assert seqs_in(await collect_until(stalled, b1)) == list(range(b0 + 1, b1 + 1))
        assert seqs_in(await collect_until(late, b1)) == list(range(b0 + 1, b1 + 1))
        for comm in steady + [stalled, late]:
            await settle(comm, quiet=0.1)
        # all in step again: the next batch is one broadcast to all six
        again = metrics.snapshot()
        b2 = await commit_batch(workspace, run_id, 10, "b2")
        for comm in steady + [stalled, late]:
            assert seqs_in(await collect_until(comm, b2)) == list(range(b1 + 1, b2 + 1))
        after = metrics.snapshot()
    d = delta(before, middle)
    # `late` caught up by itself (from_seq 3: its own read) and so was back in step for b1; `stalled`
    # was left to its own sender (woken, waiting for its ack)
    assert d["hub_broadcasts"] == 1 and d["broadcast_sends"] == len(steady) + 1, d
    assert d["sender_wakeups"] >= 1, d
    assert delta(again, after)["broadcast_sends"] == len(steady) + 2, delta(again, after)
    for comm in steady + [stalled, late]:
        await comm.disconnect()


async def test_a_page_whose_access_was_revoked_gets_nothing(
    channel_layer_kind, workspace, alice, bob, workflow
):
    """The read before a broadcast re-checks access: a removed member's pages are closed, never
    sent the batch, while the others get it from the hub."""
    from runs.live.publisher import metrics

    run_id = await start_run(workspace, workflow)
    path = f"/ws/runs/{run_id}/"
    with override_settings(LIVE_COALESCE_SECONDS=0.0):
        kept = await open_in_step(path, [alice] * 3)
        removed = await open_in_step(path, [bob] * 2)
        await warm(workspace, run_id, kept + removed)
        await remove_member(workspace, bob, quietly=True)  # as if the notification were lost
        before = metrics.snapshot()
        last = await commit_batch(workspace, run_id, 10, "secret-after-removal")
        await asyncio.gather(*(collect_until(comm, last) for comm in kept))
        after = metrics.snapshot()
    for comm in removed:
        assert (await receive(comm))["type"] == "revoked"
        assert (await comm.receive_output(timeout=5))["type"] == "websocket.close"
        assert await comm.receive_nothing(timeout=0.2)
    d = delta(before, after)
    assert d["broadcast_sends"] == d["updates_sent"] == len(kept), d
    for comm in kept:
        await comm.disconnect()


async def _open_with_csrf(path: str, user, token: str):
    from django.conf import settings

    cookie = await database_sync_to_async(session_cookie)(user)
    headers = [ORIGIN, (b"cookie", cookie + f"; {settings.CSRF_COOKIE_NAME}={token}".encode())]
    comm = WebsocketCommunicator(application(), f"{path}?last_seq=0", headers=headers)
    connected, _ = await comm.connect(timeout=5)
    assert connected
    assert (await receive(comm))["type"] == "hello"
    await settle(comm, quiet=0.1)
    return comm


async def test_a_gate_form_is_composed_per_page_with_its_own_csrf_token(
    channel_layer_kind, workspace, alice, vera, workflow
):
    """An update whose gate panel carries a form goes to each reviewer page with that page's CSRF
    token (their own senders), while viewers (no form) get it from the hub's broadcast."""
    from runs import actions
    from runs.engine import commands as cmd
    from runs.live.publisher import metrics

    run_id = await start_run(workspace, workflow)
    path = f"/ws/runs/{run_id}/"
    tokens = [f"tok{i}" + "x" * 29 for i in range(3)]
    with override_settings(LIVE_COALESCE_SECONDS=0.0):
        owners = [await _open_with_csrf(path, alice, token) for token in tokens]
        viewers = await open_in_step(path, [vera] * 3)
        await warm(workspace, run_id, owners + viewers)
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
        owner_updates = await asyncio.gather(*(collect_until(comm, last) for comm in owners))
        viewer_updates = await asyncio.gather(*(collect_until(comm, last) for comm in viewers))
        after = metrics.snapshot()
    d = delta(before, after)
    assert d["broadcast_sends"] == len(viewers), d  # the viewers only
    assert d["sender_wakeups"] >= len(owners), d
    for token, updates in zip(tokens, owner_updates, strict=True):
        html = "".join(u["html"] for u in updates)
        assert 'id="gate-panel"' in html and "resolve" in html
        assert f'value=\\"{token}\\"' in json.dumps(html) or f'value="{token}"' in html
        assert "__live_csrf_token__" not in html
        assert not any(other in html for other in tokens if other != token)
    for updates in viewer_updates:
        html = "".join(u["html"] for u in updates)
        assert 'id="gate-panel"' in html and "csrfmiddlewaretoken" not in html
    for comm in owners + viewers:
        await comm.disconnect()
