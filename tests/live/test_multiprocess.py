"""Two daphne processes sharing PostgreSQL and Redis: a write through one reaches a socket of the other.

Also a third, writer-only process (no server at all) whose broadcast must still go out before it
exits. Skipped when PostgreSQL or Redis is not running on loopback.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys

import httpx
import pytest

from tests.conftest import LINEAR_WORKFLOW
from tests.live.cluster import ORIGIN, ROOT, Cluster
from tests.live.conftest import redis_available

pytestmark = pytest.mark.postgres


def postgres_available() -> bool:
    try:
        import psycopg

        from tests.live.cluster import PG_ADMIN

        with psycopg.connect(PG_ADMIN, connect_timeout=2):
            return True
    except Exception:
        return False


async def next_update(ws, last_seq: int, timeout: float = 10.0) -> list[dict]:
    updates = []
    async with asyncio.timeout(timeout):
        while not updates or updates[-1]["last_seq"] < last_seq:
            message = json.loads(await ws.recv())
            if message["type"] == "update":
                updates.append(message)
                await ws.send(json.dumps({"type": "ack", "seq": message["last_seq"]}))
    return updates


def test_write_through_one_server_reaches_a_socket_of_the_other():
    if not (postgres_available() and redis_available()):
        pytest.skip("needs PostgreSQL and Redis on loopback")
    from websockets.asyncio.client import connect

    redis_db = int(os.environ.get("LIVE_TEST_CLUSTER_REDIS_DB", "11"))  # flushed: a db of its own
    with Cluster(database="postgres", redis_db=redis_db, servers=2) as cluster:
        seed = cluster.seed(workflow=LINEAR_WORKFLOW, run_id="run_two_proc")
        run_id, token = seed["run_id"], seed["token"]
        cookie = f"sessionid={seed['sessions']['alice']}"

        async def scenario() -> None:
            async with connect(
                cluster.ws_url(1, f"/ws/runs/{run_id}/?last_seq=0"),
                origin=ORIGIN,
                additional_headers={"Cookie": cookie},
            ) as ws:
                hello = json.loads(await ws.recv())
                assert hello["type"] == "hello" and hello["last_seq"] == 0
                async with httpx.AsyncClient() as http:
                    response = await http.post(
                        cluster.url(0, f"/api/runs/{run_id}/annotations"),
                        json={"text": "written through server zero"},
                        headers={"Authorization": f"Bearer {token}"},
                    )
                assert response.status_code == 200, response.text
                updates = await next_update(ws, 1)
                assert "written through server zero" in updates[-1]["html"]
                assert re.findall(r'data-seq="(\d+)"', updates[-1]["html"]) == ["1"]

                # A writer-only process (no websockets, no server) flushes its broadcast at exit.
                code = (
                    "import django; django.setup()\n"
                    "from runs.execution.host import Workbench\n"
                    f"Workbench(workspace='acme', actor='pipeline:cli').session({run_id!r}).annotate('from a script')\n"
                )
                result = await asyncio.to_thread(
                    subprocess.run,
                    [sys.executable, "-c", code],
                    cwd=ROOT,
                    env=cluster.env(),
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                assert result.returncode == 0, result.stderr
                updates = await next_update(ws, 2)
                assert updates[0]["from_seq"] == 1 and "from a script" in updates[-1]["html"]

        asyncio.run(scenario())

        # The transcript over HTTP from a real ASGI server (streamed by an async iterator) is the
        # same as the CLI's, line for line.
        response = httpx.get(
            cluster.url(1, f"/api/runs/{run_id}/transcript.jsonl"),
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("application/jsonl")
        assert response.text == cluster.manage("transcript", run_id)
        lines = [json.loads(line) for line in response.text.splitlines()]
        assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))
        assert [line["type"] for line in lines] == ["run.started", "step.completed", "step.completed"]

        # Outsiders are refused by the second server too.
        async def outsider() -> None:
            from websockets.exceptions import InvalidStatus

            with pytest.raises(InvalidStatus):
                async with connect(cluster.ws_url(1, f"/ws/runs/{run_id}/"), origin=ORIGIN):
                    pass

        asyncio.run(outsider())
