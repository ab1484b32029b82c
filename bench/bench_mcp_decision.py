"""MCP request_decision, waited on with the SDK's stock loop: how soon a decision reaches the host.

One daphne (SQLite). For each of N rounds a host calls `Client.call_tool("request_decision")`
(protocol 2026-07-28, mode="auto"; and 2025-11-25 with the ticket) and a reviewer resolves the
gate over REST after a random 0.5-3 s; printed: the latency from the reviewer's 200 to the host's
answer (median, max), and how long the stock loop lasts with nobody deciding when the server
answers at once (waitSeconds=0: the behaviour before the long poll).

    MCP_BENCH_ROUNDS=10 python bench/bench_mcp_decision.py
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import httpx2  # noqa: E402
from mcp.client.client import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from tests.conftest import LINEAR_WORKFLOW  # noqa: E402
from tests.live.cluster import Cluster  # noqa: E402

ROUNDS = int(os.environ.get("MCP_BENCH_ROUNDS", "10"))


def client(url: str, token: str, mode: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
    return Client(streamable_http_client(url, http_client=http), mode=mode)


def resolve_later(cluster: Cluster, token: str, run_id: str, delay: float, out: dict) -> None:
    time.sleep(delay)
    answer = httpx.post(
        cluster.url(0, f"/api/runs/{run_id}/gates/resolve"),
        headers={"Authorization": f"Bearer {token}"},
        json={
            "stepId": "parse",
            "gate": "CHECKPOINT",
            "checkpoint": "agent-decision",
            "decision": "approved",
        },
        timeout=30,
    )
    out["at"] = time.monotonic()
    out["status"] = answer.status_code


async def one_round(cluster: Cluster, token: str, mode: str, index: int) -> float:
    url = cluster.url(0, "/api/mcp")
    run_id = f"run_bench_{mode}_{index}"
    async with client(url, token, mode) as c:
        await c.call_tool("start_run", {"workflow": LINEAR_WORKFLOW, "runId": run_id})
        decided: dict = {}
        reviewer = threading.Thread(
            target=resolve_later, args=(cluster, token, run_id, random.uniform(0.5, 3), decided), daemon=True
        )
        reviewer.start()
        result = await c.call_tool("request_decision", {"runId": run_id, "stepId": "parse"})
        answered = time.monotonic()
        reviewer.join()
        assert result.structured_content["status"] == "decided", result
        assert decided["status"] == 200, decided
        return answered - decided["at"]


async def exhausted(cluster: Cluster, token: str) -> float:
    async with client(cluster.url(0, "/api/mcp"), token, "auto") as c:
        await c.call_tool("start_run", {"workflow": LINEAR_WORKFLOW, "runId": "run_bench_nobody"})
        started = time.monotonic()
        try:
            await c.call_tool(
                "request_decision", {"runId": "run_bench_nobody", "stepId": "parse", "waitSeconds": 0}
            )
        except Exception as exc:  # InputRequiredRoundsExceededError
            print(
                f"waitSeconds=0, nobody deciding: {type(exc).__name__} after {time.monotonic() - started:.2f} s"
            )
        return time.monotonic() - started


def main() -> int:
    with Cluster(database="sqlite", servers=1) as cluster:
        token = cluster.seed(workflow=LINEAR_WORKFLOW, run_id="run_bench")["token"]
        for mode in ("auto", "legacy"):
            latencies = [asyncio.run(one_round(cluster, token, mode, i)) for i in range(ROUNDS)]
            print(
                f"{mode}: decision -> host answer, {ROUNDS} rounds: median {statistics.median(latencies) * 1000:.0f} ms, "
                f"max {max(latencies) * 1000:.0f} ms"
            )
        asyncio.run(exhausted(cluster, token))
    return 0


if __name__ == "__main__":
    sys.exit(main())
