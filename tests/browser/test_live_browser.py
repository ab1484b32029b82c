"""Live run page in real Chromium: rows and the gate panel change while other clients write.

Run separately: ``.venv/bin/pytest tests/browser/test_live_browser.py -m browser``.
One daphne (SQLite, in-memory layer). Alice's page is open on a run; a host appends events over the
REST API (a gate gets requested), Bob (a reviewer, another browser context) approves the gate from
the panel that reached his page over the websocket, and Alice's page shows the new rows, the pending
gate and then the decision, without reloading. Console errors (CSP violations included) fail.
"""

from __future__ import annotations

import httpx
import pytest

from tests.browser.support import launch, require_chromium
from tests.conftest import LINEAR_WORKFLOW
from tests.live.cluster import Cluster

pytestmark = pytest.mark.browser


def event(run_id: str, n: int, **fields) -> dict:
    return {"id": f"evt_live_{n}", "runId": run_id, "ts": f"2026-01-01T00:00:{n:02d}.000Z", **fields}


def test_page_follows_rows_and_gate_panel():
    from playwright.sync_api import expect, sync_playwright

    require_chromium()
    # approvals are sent at once (the undo delay is measured in test_keyboard_review_browser)
    with Cluster(database="sqlite", servers=1, extra_env={"WORKBENCH_APPROVE_UNDO_MS": "0"}) as cluster:
        seed = cluster.seed(
            workflow=LINEAR_WORKFLOW,
            run_id="run_live_browser",
            users=(("alice", "owner"), ("bob", "reviewer")),
        )
        run_id, token = seed["run_id"], seed["token"]
        base = cluster.url(0, "")
        api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30)

        with sync_playwright() as p:
            browser = launch(p)
            errors: list[str] = []
            pages = {}
            for name in ("alice", "bob"):
                context = browser.new_context()
                context.add_cookies([{"name": "sessionid", "value": seed["sessions"][name], "url": base}])
                page = context.new_page()
                page.on(
                    "console", lambda m, who=name: m.type == "error" and errors.append(f"{who}: {m.text}")
                )
                page.on("pageerror", lambda e, who=name: errors.append(f"{who}: {e}"))
                page.goto(f"{base}/runs/{run_id}/")
                expect(page.locator("#live")).to_have_attribute("data-live", "open")
                pages[name] = page
            alice, bob = pages["alice"], pages["bob"]
            expect(alice.locator("#gate-panel")).to_contain_text("No gate is waiting")

            # A host appends: parse runs and completes, then the review step asks for its gate.
            response = api.post(
                f"/api/runs/{run_id}/events",
                json={
                    "events": [
                        event(run_id, 1, type="step_started", stepId="parse"),
                        event(
                            run_id, 2, type="tool_call", stepId="parse", name="grep", args={"q": "live row"}
                        ),
                        event(run_id, 3, type="step_completed", stepId="parse", ok=True),
                        event(run_id, 4, type="human_gate_requested", stepId="review", gate="PAUSE_BEFORE"),
                    ]
                },
            )
            assert response.status_code == 200, response.text
            for page in (alice, bob):
                expect(page.locator("#timeline-list li[data-seq]")).to_have_count(4)
                expect(page.locator("#seq-2")).to_contain_text("grep")
                expect(page.locator("#live")).to_have_attribute("data-last-seq", "4")
                expect(page.locator("#gate-panel")).to_contain_text("review")
                expect(page.locator("#run-status")).to_contain_text("1 gate pending")
            expect(alice.locator("#gate-panel")).not_to_contain_text("No gate is waiting")

            # Bob approves from the panel that arrived over the websocket (its form carries his CSRF token).
            bob.locator("#gate-panel button[value=approved]").click()
            expect(alice.locator("#gate-panel")).to_contain_text("No gate is waiting")
            expect(alice.locator("#gate-panel .history")).to_contain_text("approved")
            expect(alice.locator("#timeline-list li[data-seq]")).to_have_count(5)
            expect(alice.locator("#seq-5")).to_contain_text("human_gate_resolved")
            expect(alice.locator("#live")).to_have_attribute("data-last-seq", "5")
            expect(alice.locator("#run-status")).not_to_contain_text("pending")

            # The server goes away; meanwhile a script appends straight to the database. When the
            # server is back, the page reconnects with its seq and fetches what it missed.
            cluster.stop_server(0)
            expect(alice.locator("#live")).to_have_attribute("data-live", "reconnecting")
            cluster.python(
                "from runs.execution.host import Workbench\n"
                f"Workbench(workspace='acme', actor='pipeline:script').session({run_id!r}).annotate('while away')\n"
            )
            cluster.restart_server(0)
            expect(alice.locator("#timeline-list li[data-seq]")).to_have_count(6, timeout=20_000)
            expect(alice.locator("#seq-6")).to_contain_text("while away")
            expect(alice.locator("#live")).to_have_attribute("data-live", "open")
            response = api.post(f"/api/runs/{run_id}/annotations", json={"text": "after the restart"})
            assert response.status_code == 200, response.text
            expect(alice.locator("#seq-7")).to_contain_text("after the restart")
            browser.close()
            # Failed reconnection attempts while the server was down log network errors; nothing else may.
            assert [e for e in errors if "WebSocket connection" not in e] == []
