"""The outsider matrix for websockets, generated from workbench.routing: for every socket route,
an anonymous caller and another workspace's user are refused exactly as for a missing object
and hear nothing of the victim's events, while a member (the control) does connect and hear."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from tests.live.conftest import ORIGIN, session_cookie
from tests.security import routes as r
from tests.security.world import CANARY, VICTIM_RUN, build_world

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


async def _open(path: str, user=None):
    from workbench.asgi import application

    headers = [ORIGIN]
    if user is not None:
        headers.append((b"cookie", await database_sync_to_async(session_cookie)(user)))
    comm = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await comm.connect(timeout=5)
    return comm, connected, code


@database_sync_to_async
def _annotate(world) -> None:
    from runs import actions
    from runs.engine import commands as c

    actions.do_command(
        workspace=world.workspace, run_id=VICTIM_RUN, command=c.Annotate(text=f"live {CANARY}"), actor="t"
    )


async def _heard(comm, timeout: float = 0.5) -> list[str]:
    messages = []
    while not await comm.receive_nothing(timeout=timeout):
        output = await comm.receive_output(timeout=timeout)
        if output["type"] == "websocket.close":
            break
        messages.append(output.get("text") or repr(output.get("bytes")))
    return messages


async def _close(comm) -> None:
    try:
        await comm.disconnect()
    except Exception:  # already closed by the server
        pass


async def test_sockets_refuse_outsiders_like_missing_objects(
    workspace, other_workspace, alice, vera, charlie, workflow
):
    world = await database_sync_to_async(build_world)(
        workspace, other_workspace, alice, vera, charlie, workflow
    )
    failures = []
    for route in r.socket_routes():
        victim_path = route.url(world.values())
        member, ok, code = await _open(victim_path, alice)
        if not ok:
            failures.append(f"{route.path}: the control failed: the owner could not connect ({code})")
        for label, user in (("anonymous", None), ("outsider", charlie)):
            comm, connected, code = await _open(victim_path, user)
            if route.kind == "scoped":
                twin, twin_connected, twin_code = await _open(route.url(world.values(missing=True)), user)
                await _close(twin)
                if connected or (code, connected) != (twin_code, twin_connected):
                    failures.append(
                        f"{route.path} {label}: connected={connected} code={code} for the victim's object, "
                        f"connected={twin_connected} code={twin_code} for a missing one"
                    )
            elif label == "anonymous" and connected:
                failures.append(f"{route.path} anonymous: connected")
            if connected:
                await _annotate(world)
                heard = await _heard(comm)
                if any(VICTIM_RUN in text or CANARY in text for text in heard):
                    failures.append(f"{route.path} {label}: heard the victim's events: {heard[:2]}")
            await _close(comm)
        if ok:
            await _close(member)
    assert not failures, "\n".join(failures)


async def test_the_workspace_socket_control_hears_the_victims_events(
    workspace, other_workspace, alice, vera, charlie, workflow
):
    """Without this the "heard nothing" checks above could pass because nothing was sent."""
    world = await database_sync_to_async(build_world)(
        workspace, other_workspace, alice, vera, charlie, workflow
    )
    for route in r.socket_routes():
        if route.kind != "workspace":
            continue
        comm, ok, _ = await _open(route.url({}), alice)
        assert ok
        await _annotate(world)
        heard = await _heard(comm, timeout=2)
        assert any(VICTIM_RUN in text for text in heard), (route.path, heard)
        await _close(comm)
