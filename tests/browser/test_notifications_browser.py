"""A gate starts waiting and everyone who asked is told, in the embedded profile (one daphne,
SQLite, the server delivering from its own process): the webhook receiver (signature checked
with standardwebhooks), the Slack-shaped receiver and the console e-mail all get it within 2 s;
the owner's settings page shows the delivery; "Retry" sends a failed one again (same webhook-id).

Run alone: ``pytest tests/browser/test_notifications_browser.py -m browser``.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest
from standardwebhooks import Webhook as Verifier

from tests.browser.support import launch, new_page, serve_app, shot, sign_in
from tests.fakes.webhook_receiver import Answer, Receiver

pytestmark = pytest.mark.browser

SETUP = """
import django, json; django.setup()
from django.contrib.auth import get_user_model
from accounts.tokens import create_token
from runs import actions
from runs.actions.webhooks import do_create_webhook, do_set_notification_preferences
from runs.actions.workspaces import add_member, get_or_create_workspace
from tests.conftest import LINEAR_WORKFLOW
ws = get_or_create_workspace("acme", name="Acme")
User = get_user_model()
alice = User.objects.create_user("alice", password="alice-password-123", email="alice@example.com")
add_member(ws, alice, "owner")
vera = User.objects.create_user("vera", password="vera-password-123", email="vera@example.com")
add_member(ws, vera, "viewer")
for user in (alice, vera):
    do_set_notification_preferences(user=user, workspace=ws, gates_to_decide=True, runs_i_started=False)
hook = do_create_webhook(workspace=ws, url=__HOOK__, events=["gate.requested"], description="ci")
do_create_webhook(workspace=ws, url=__SLACK__, events=["gate.requested"], kind="slack")
actions.do_start_run(workspace=ws, workflow=LINEAR_WORKFLOW, run_id="run_notify", actor="user:alice", title="Weekly digest")
token = create_token(workspace=ws, name="host", scopes=["read", "write"]).secret
open(__OUT__, "w").write(json.dumps({"secret": hook.secret, "hook": hook.webhook.public_id, "token": token}))
"""


def _event(n: int, **fields) -> dict:
    return {"id": f"evt_nb_{n}", "runId": "run_notify", "ts": f"2026-01-01T00:00:{n:02d}.000Z", **fields}


def _wait_for_text(path, text: str, deadline: float) -> bool:
    while time.time() < deadline:
        if text in path.read_text():
            return True
        time.sleep(0.05)
    return text in path.read_text()


def test_a_waiting_gate_reaches_hook_slack_and_mail_and_the_log_retries(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    answers = {"hook": Answer(200, body=b"thanks")}
    with (
        Receiver(lambda hit: answers["hook"]) as hook_rx,
        Receiver(lambda hit: Answer(200, body=b"ok"), path="/services/T0/B0/x") as slack_rx,
    ):
        out = tmp_path / "seed.json"
        setup = SETUP.replace("__HOOK__", repr(hook_rx.url)).replace("__SLACK__", repr(slack_rx.url))
        setup = setup.replace("__OUT__", repr(str(out)))
        env = {
            "WORKBENCH_EGRESS_ALLOW": "127.0.0.0/8",
            "WORKBENCH_SITE_URL": "http://wb.test",
            "WORKBENCH_EMAIL": "console",
        }
        with serve_app(tmp_path, setup_code=setup, extra_env=env, keep_stdout=True, workers=1) as base:
            seed = json.loads(out.read_text())
            host = httpx.Client(
                base_url=base, headers={"Authorization": f"Bearer {seed['token']}"}, timeout=30
            )

            assert host.get("/api/runs").status_code == 200  # a first request warms the server up
            started = time.time()
            response = host.post(
                "/api/runs/run_notify/events",
                json={
                    "events": [
                        _event(1, type="step_started", stepId="parse"),
                        _event(2, type="step_completed", stepId="parse", ok=True),
                    ]
                },
            )
            assert response.status_code == 200, response.text
            deadline = started + 2.0
            (hit,) = hook_rx.wait_for(1, timeout=max(0.0, deadline - time.time()))
            (slack,) = slack_rx.wait_for(1, timeout=max(0.0, deadline - time.time()))
            stdout = tmp_path / "stdout.log"
            assert _wait_for_text(stdout, "Subject: [Workbench] A gate is waiting for you", deadline)
            assert hit.at - started < 2.0 and slack.at - started < 2.0

            payload = Verifier(seed["secret"]).verify(hit.body, hit.headers)
            assert payload["type"] == "gate.requested" and payload["data"]["gate"]["stepId"] == "review"
            assert payload["data"]["gate"]["url"] == "http://wb.test/runs/run_notify/#gate-panel"
            assert slack.json["blocks"][1]["elements"][0]["text"]["text"] == "Open the gate"
            mails = stdout.read_text()
            assert (
                "To: alice@example.com" in mails and "vera@example.com" not in mails
            )  # a viewer decides nothing
            assert "Open the gate: http://wb.test/runs/run_notify/#gate-panel" in mails

            with sync_playwright() as pw:
                browser = launch(pw)
                page = new_page(browser)
                sign_in(page, base, "alice")
                page.goto(f"{base}/settings/webhooks/")
                log = page.locator(f"#hook-{seed['hook']} table.deliveries")
                expect(log.locator("tr[data-status=delivered]")).to_have_count(1)
                expect(log).to_contain_text("gate.requested")
                expect(log).to_contain_text("thanks")

                # The receiver goes away (410): the test event fails and the hook is disabled.
                answers["hook"] = Answer(410, body=b"gone")
                page.locator(f"#hook-{seed['hook']} button[value=test]").click()
                hook_rx.wait_for(2, timeout=10)
                for _ in range(40):
                    page.goto(f"{base}/settings/webhooks/")
                    if page.locator(f"#hook-{seed['hook']} tr[data-status=failed]").count():
                        break
                    time.sleep(0.25)
                section = page.locator(f"#hook-{seed['hook']}")
                expect(section).to_contain_text("Disabled: the receiver answered 410 Gone")
                shot(page, "notifications-failed-delivery")

                # It is back: enable, then Retry the failed delivery: the same webhook-id again.
                answers["hook"] = Answer(200, body=b"back")
                section.locator("button[value=enable]").click()
                section = page.locator(f"#hook-{seed['hook']}")
                section.locator("tr[data-status=failed] button[value=retry]").click()
                hits = hook_rx.wait_for(3, timeout=10)
                assert len(hits) == 3 and hits[2].headers["webhook-id"] == hits[1].headers["webhook-id"]
                for _ in range(40):
                    page.goto(f"{base}/settings/webhooks/")
                    if page.locator(f"#hook-{seed['hook']} tr[data-status=delivered]").count() == 2:
                        break
                    time.sleep(0.25)
                expect(page.locator(f"#hook-{seed['hook']} tr[data-status=delivered]")).to_have_count(2)
                shot(page, "notifications-retried")
                assert page.console_errors == []
                browser.close()
