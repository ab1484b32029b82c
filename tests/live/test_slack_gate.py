"""Slack, interactive, end to end: a real server (daphne on loopback, SQLite) and a task worker,
the official slack_sdk against a loopback fake of Slack's Web API, the host SDK waiting on a gate.
Approve in Slack (a request signed as Slack signs it) -> the host's ``wait()`` returns, the gate
message is updated in place, and the signed bundle's approval names the member and ``slack``.

The server looks at the database for a decision only every 30 s here
(``WORKBENCH_GATE_WAIT_POLL_MS``): a ``wait()`` that returns sooner was woken by the commit.
"""

from __future__ import annotations

import base64
import json
import threading
import time

import httpx
import pytest
from workbench_sdk import RemoteRun, WorkbenchClient

from tests.fakes.slack_api import CHANNEL, TEAM, FakeSlack, block_action, signed
from tests.live.cluster import Cluster

pytestmark = pytest.mark.slow

POLL_SECONDS = 30.0
SECRET = "live-signing-secret-0123456789"
SEED_WORKFLOW = {"id": "seed", "version": 0, "steps": [{"id": "only"}]}
SETUP = """
from runs.actions.slack import do_create_slack_app
from runs.models import SlackLink, Workspace
from django.contrib.auth import get_user_model
ws = Workspace.objects.get(pk={workspace_id})
made = do_create_slack_app(workspace=ws, bot_token="xoxb-live", signing_secret={secret!r}, channel={channel!r})
SlackLink.objects.create(workspace=ws, user=get_user_model().objects.get(username="rita"), team_id={team!r}, slack_user_id="U0RITA")
print("HOOK", made.webhook.public_id)
"""


@pytest.fixture(scope="module")
def world():
    with FakeSlack() as slack:
        env = {
            "WORKBENCH_SLACK_API_URL": slack.api_url,
            "WORKBENCH_EGRESS_ALLOW": "127.0.0.0/8",
            "WORKBENCH_GATE_WAIT_POLL_MS": str(int(POLL_SECONDS * 1000)),
        }
        with Cluster(database="sqlite", workers=1, extra_env=env) as cluster:
            seed = cluster.seed(workflow=SEED_WORKFLOW, users=(("alice", "owner"), ("rita", "reviewer")))
            cluster.python(
                SETUP.format(workspace_id=seed["workspace_id"], secret=SECRET, channel=CHANNEL, team=TEAM)
            )
            yield cluster, seed, slack


def test_approve_in_slack_wakes_wait_updates_the_message_and_signs_the_channel(world):
    cluster, seed, slack = world
    client = WorkbenchClient(f"http://127.0.0.1:{cluster.ports[0]}", seed["token"])
    run = RemoteRun.start(client, workflow={"id": "manual", "version": 0, "steps": [{"id": "write"}]})
    run.start_step("write")
    handle = run.gate("write", name="tone", reason="Is the tone right?")
    got: dict = {}

    def waiter() -> None:
        got["decision"] = handle.wait(timeout=POLL_SECONDS * 2)
        got["at"] = time.monotonic()

    thread = threading.Thread(target=waiter)
    thread.start()
    (message,) = slack.wait_for("chat.postMessage", timeout=30)  # the worker posted the gate
    body, headers = signed(SECRET, block_action(message, "wb_approve", user="U0RITA"))
    answer = httpx.post(
        cluster.url(0, "/integrations/slack/interactions"),
        content=body,
        headers={**headers, "Content-Type": "application/x-www-form-urlencoded"},
    )
    decided = time.monotonic()
    assert answer.status_code == 200 and answer.json() == {"ok": True}, answer.text
    thread.join(POLL_SECONDS * 2)
    decision = got["decision"]
    assert decision["decision"] == "approved" and decision["by"] == "user:rita"
    assert got["at"] - decided < POLL_SECONDS / 2  # woken by the commit, not the 30 s look
    (update,) = slack.wait_for("chat.update", timeout=30)
    assert update["channel"] == CHANNEL and "Approved by rita in slack" in update["text"]
    bundle = json.loads(client.export_bundle(run.run_id))
    envelope = bundle["integrity"]["attestations"][0]
    statement = json.loads(base64.b64decode(envelope["payload"]))
    (approval,) = statement["predicate"]["approvals"]
    assert approval["by"] == "user:rita" and approval["channel"] == "slack"
    run.complete_step("write")
    run.finish()
    replies = [m for m in slack.wait_for("chat.postMessage", count=2, timeout=30) if m.get("thread_ts")]
    assert replies and replies[0]["thread_ts"] and "Run completed" in replies[0]["text"]
    client.close()
