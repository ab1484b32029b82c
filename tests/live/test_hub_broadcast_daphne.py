"""Hub-level broadcast under a real daphne: the pages in step of a run are sent the hub's one prepared
websocket frame (autobahn's sendPreparedMessage), written to the socket at once (runs.live.transport:
one send(2), not Twisted's buffered write), and none of their own sender tasks wakes."""

from __future__ import annotations

import asyncio
import json

import httpx

from tests.conftest import LINEAR_WORKFLOW
from tests.live.cluster import ORIGIN, Cluster


def test_under_daphne_a_broadcast_is_one_prepared_frame_for_every_page():
    """Real daphne: pages in step are sent the hub's prepared frame, none of their senders wakes, and
    their acks are taken where daphne receives them."""
    from websockets.asyncio.client import connect

    pages, rounds = 8, 12
    with Cluster(database="sqlite", servers=1) as cluster:
        seed = cluster.seed(workflow=LINEAR_WORKFLOW, run_id="run_hubcast")
        run_id, token = seed["run_id"], seed["token"]
        cookie = f"sessionid={seed['sessions']['alice']}"

        async def counters(http: httpx.AsyncClient) -> dict:
            response = await http.get(cluster.url(0, "/live/metrics"))
            assert response.status_code == 200, response.text
            return response.json()["counters"]

        async def annotate(http: httpx.AsyncClient, text: str) -> None:
            response = await http.post(
                cluster.url(0, f"/api/runs/{run_id}/annotations"),
                json={"text": text},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert response.status_code == 200, response.text

        async def until(ws, text: str) -> list[dict]:
            updates = []
            async with asyncio.timeout(10):
                while True:
                    message = json.loads(await ws.recv())
                    if message["type"] != "update":
                        continue
                    if updates:
                        assert message["from_seq"] == updates[-1]["last_seq"]
                    updates.append(message)
                    # compact, as live.js sends it: taken where daphne receives the frame
                    await ws.send(f'{{"type":"ack","seq":{message["last_seq"]}}}')
                    if text in message["html"]:
                        return updates

        async def scenario() -> None:
            sockets = []
            for _ in range(pages):
                ws = await connect(
                    cluster.ws_url(0, f"/ws/runs/{run_id}/?last_seq=0"),
                    origin=ORIGIN,
                    additional_headers={"Cookie": cookie},
                )
                assert json.loads(await ws.recv())["type"] == "hello"
                sockets.append(ws)
            async with httpx.AsyncClient(
                timeout=10, cookies={"sessionid": seed["sessions"]["alice"]}
            ) as http:
                await annotate(http, "warm")
                await asyncio.gather(*(until(ws, "warm") for ws in sockets))
                await asyncio.sleep(0.3)  # acks in
                before = await counters(http)
                for i in range(
                    rounds
                ):  # more than LIVE_MAX_INFLIGHT (8): only applied acks keep pages in step
                    await annotate(http, f"broadcast-{i}")
                    got = await asyncio.gather(*(until(ws, f"broadcast-{i}") for ws in sockets))
                    assert all(len(updates) == 1 for updates in got)
                    assert len({json.dumps(updates[-1]) for updates in got}) == 1  # the same frame
                after = await counters(http)
                d = {
                    k: after[k] - before[k]
                    for k in (
                        "hub_broadcasts",
                        "broadcast_sends",
                        "prepared_sends",
                        "direct_writes",
                        "buffered_writes",
                        "sender_wakeups",
                    )
                }
                acks = after["frame_acks"] - before["frame_acks"]
                assert pages * (rounds - 1) <= acks <= pages * rounds  # the last round's may be on the way
                assert d == {
                    "hub_broadcasts": rounds,
                    "broadcast_sends": pages * rounds,
                    "prepared_sends": pages * rounds,
                    # each frame went to the kernel at once (runs.live.transport.send_now): the pages'
                    # transports were empty (every earlier message had arrived)
                    "direct_writes": pages * rounds,
                    "buffered_writes": 0,
                    "sender_wakeups": 0,
                }, d
                # any other frame still reaches the consumer: a resync is answered from its seq
                head = got[0][-1]["last_seq"]
                await sockets[0].send(f'{{"type":"resync","after_seq":{head - 3}}}')
                resent = await until(sockets[0], f"broadcast-{rounds - 1}")
                assert (resent[0]["from_seq"], resent[-1]["last_seq"]) == (head - 3, head)
            for ws in sockets:
                await ws.close()

        asyncio.run(scenario())
