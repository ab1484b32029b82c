"""Websocket authorization is not only at connect: a member removed while their socket is open
stops receiving the run at once (signal), and a push re-checks access even when no signal came."""

from __future__ import annotations

import orjson
import pytest
from channels.db import database_sync_to_async

from tests.live.test_consumers import annotate, open_socket, receive, settle, start_run

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


async def _next_of(comm, kinds: set[str], timeout: float = 5.0) -> dict:
    while True:
        message = await receive(comm, timeout=timeout)
        if message["type"] == "update":
            await comm.send_to(text_data=orjson.dumps({"type": "ack", "seq": message["last_seq"]}).decode())
        if message["type"] in kinds:
            return message


@database_sync_to_async
def remove_member(workspace, user, *, quietly: bool = False) -> None:
    from django.db.models.signals import post_delete

    from runs.live.publisher import _membership_changed
    from runs.models import Membership

    if quietly:  # as if the notification were lost: only the re-check before a push remains
        post_delete.disconnect(
            _membership_changed, sender=Membership, dispatch_uid="live-access-membership-delete"
        )
    try:
        Membership.objects.filter(workspace=workspace, user=user).delete()
    finally:
        if quietly:
            post_delete.connect(
                _membership_changed, sender=Membership, dispatch_uid="live-access-membership-delete"
            )


async def test_removed_member_is_closed_at_once(channel_layer_kind, workspace, alice, bob, workflow):
    run_id = await start_run(workspace, workflow)
    owner, ok1, _ = await open_socket(f"/ws/runs/{run_id}/", alice, last_seq=0)
    removed, ok2, _ = await open_socket(f"/ws/runs/{run_id}/", bob, last_seq=0)
    assert ok1 and ok2
    await settle(owner)
    await settle(removed)
    await remove_member(workspace, bob)
    assert (await _next_of(removed, {"revoked"}))["type"] == "revoked"
    assert (await removed.receive_output(timeout=5))["type"] == "websocket.close"
    # The owner still follows the run.
    last = await annotate(workspace, run_id, 1, text="after-removal")
    update = await _next_of(owner, {"update"})
    assert update["last_seq"] == last and "after-removal" in update["html"]
    await owner.disconnect()


async def test_a_push_rechecks_access_even_without_a_notification(
    channel_layer_kind, workspace, alice, bob, workflow
):
    run_id = await start_run(workspace, workflow)
    removed, ok, _ = await open_socket(f"/ws/runs/{run_id}/", bob, last_seq=0)
    assert ok
    await settle(removed)
    await remove_member(workspace, bob, quietly=True)
    await annotate(workspace, run_id, 1, text="secret-after-removal")
    message = await _next_of(removed, {"revoked", "update"})
    assert message["type"] == "revoked", message
    assert (await removed.receive_output(timeout=5))["type"] == "websocket.close"


async def test_workspace_socket_closes_when_its_last_membership_goes(
    channel_layer_kind, workspace, bob, workflow
):
    comm, ok, _ = await open_socket("/ws/workspace/", bob)
    assert ok
    await remove_member(workspace, bob)
    assert (await comm.receive_output(timeout=5))["type"] == "websocket.close"
    run_id = await start_run(workspace, workflow, run_id="run_after")
    assert run_id == "run_after"
    assert await comm.receive_nothing(timeout=0.3)
