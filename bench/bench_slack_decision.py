"""Approve in Slack, waited on with the host SDK's ``run.gate(...).wait()``: how soon a decision
made from Slack reaches the host.

One daphne (SQLite), a Slack app whose Web API is a loopback fake (tests/fakes/slack_api.py), a
linked reviewer. For each of N rounds the host opens a gate and waits; the "Slack user" posts a
signed Approve (as Slack signs it) to /integrations/slack/interactions after 0.5-2 s. Printed:
the latency from Slack's 200 to the host's ``wait()`` returning (median, max).

    SLACK_BENCH_ROUNDS=10 python bench/bench_slack_decision.py
"""

from __future__ import annotations

import json
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
from workbench_sdk import RemoteRun, WorkbenchClient  # noqa: E402

from tests.fakes.slack_api import CHANNEL, TEAM, FakeSlack, signed  # noqa: E402
from tests.live.cluster import Cluster  # noqa: E402

ROUNDS = int(os.environ.get("SLACK_BENCH_ROUNDS", "10"))
SECRET = "bench-signing-secret"
SETUP = """
from runs.actions.slack import do_create_slack_app
from runs.models import SlackLink, Workspace
from django.contrib.auth import get_user_model
ws = Workspace.objects.get(pk={workspace_id})
made = do_create_slack_app(workspace=ws, bot_token="xoxb-bench", signing_secret={secret!r}, channel={channel!r})
SlackLink.objects.create(workspace=ws, user=get_user_model().objects.get(username="rita"), team_id={team!r}, slack_user_id="U0RITA")
print("HOOK " + made.webhook.public_id)
"""


def approve(cluster: Cluster, hook: str, run_id: str, index: int) -> float:
    ref = json.dumps({"h": hook, "r": run_id, "s": "write", "g": "CHECKPOINT", "c": f"tone{index}"})
    payload = {
        "type": "block_actions",
        "team": {"id": TEAM},
        "user": {"id": "U0RITA", "team_id": TEAM},
        "channel": {"id": CHANNEL},
        "trigger_id": f"bench.{index}",
        "actions": [{"action_id": "wb_approve", "value": ref, "type": "button"}],
    }
    body, headers = signed(SECRET, payload)
    answer = httpx.post(
        cluster.url(0, "/integrations/slack/interactions"),
        content=body,
        headers={**headers, "Content-Type": "application/x-www-form-urlencoded"},
        timeout=30,
    )
    assert answer.status_code == 200 and answer.json() == {"ok": True}, answer.text
    return time.monotonic()


def one_round(cluster: Cluster, client: WorkbenchClient, hook: str, index: int) -> float:
    run = RemoteRun.start(client, workflow={"id": "manual", "version": 0, "steps": [{"id": "write"}]})
    run.start_step("write")
    handle = run.gate("write", name=f"tone{index}", reason="Is the tone right?")
    decided: dict = {}

    def slack_user() -> None:
        time.sleep(random.uniform(0.5, 2))
        decided["at"] = approve(cluster, hook, run.run_id, index)

    thread = threading.Thread(target=slack_user, daemon=True)
    thread.start()
    decision = handle.wait(timeout=60)
    returned = time.monotonic()
    thread.join()
    assert decision["decision"] == "approved" and decision["by"] == "user:rita", decision
    return returned - decided["at"]


def main() -> int:
    env = {
        "WORKBENCH_GATE_WAIT_POLL_MS": "30000",
        "WORKBENCH_EGRESS_ALLOW": "127.0.0.0/8",
    }  # the fake is loopback
    with FakeSlack() as slack:
        env["WORKBENCH_SLACK_API_URL"] = slack.api_url
        with Cluster(database="sqlite", servers=1, extra_env=env) as cluster:
            seed = cluster.seed(
                workflow={"id": "seed", "version": 0, "steps": [{"id": "only"}]},
                users=(("alice", "owner"), ("rita", "reviewer")),
            )
            out = cluster.python(
                SETUP.format(workspace_id=seed["workspace_id"], secret=SECRET, channel=CHANNEL, team=TEAM)
            )
            hook = next(line.split()[1] for line in out.splitlines() if line.startswith("HOOK "))
            client = WorkbenchClient(f"http://127.0.0.1:{cluster.ports[0]}", seed["token"])
            latencies = [one_round(cluster, client, hook, i) for i in range(ROUNDS)]
            client.close()
    print(
        f"slack: Approve (signed interaction) -> host wait() returns, {ROUNDS} rounds: "
        f"median {statistics.median(latencies) * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
