"""The span tree follows a running run in Chromium (issue 27): spans a host appends over the REST
API appear in the open tree without a reload. The page opens on a run with no span yet (a slot);
the first span brings the trace panel; a child makes the root openable; opened, its level takes the
next child live; ends update a span's badge and duration and the failed count. Axe finds no
serious or critical violation on the live-updated tree; console errors (CSP included) fail.
"""

from __future__ import annotations

import httpx
import pytest

from tests.browser.support import launch, require_chromium
from tests.conftest import LINEAR_WORKFLOW
from tests.live.cluster import Cluster

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def event(run_id: str, n: int, **fields) -> dict:
    return {"id": f"evt_span_{n}", "runId": run_id, "ts": f"2026-01-01T00:00:{n:02d}.000Z", **fields}


def test_new_spans_appear_in_the_tree_while_the_run_runs():
    from axe_playwright_python.sync_playwright import Axe
    from playwright.sync_api import expect, sync_playwright

    require_chromium()
    with Cluster(database="sqlite", servers=1) as cluster:
        seed = cluster.seed(workflow=LINEAR_WORKFLOW, run_id="run_live_spans", users=(("alice", "owner"),))
        run_id, token = seed["run_id"], seed["token"]
        base = cluster.url(0, "")
        api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30)

        def append(*events):
            response = api.post(f"/api/runs/{run_id}/events", json={"events": list(events)})
            assert response.status_code == 200, response.text

        with sync_playwright() as p:
            browser = launch(p)
            errors: list[str] = []
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.add_cookies([{"name": "sessionid", "value": seed["sessions"]["alice"], "url": base}])
            page = context.new_page()
            page.on("console", lambda m: m.type == "error" and errors.append(m.text))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{base}/runs/{run_id}/")
            expect(page.locator("#live")).to_have_attribute("data-live", "open")
            expect(page.locator("#trace-slot")).to_be_attached()

            append(event(run_id, 1, type="span_started", spanId="batch", name="score batch"))
            root = page.locator("#span-tree > [role=treeitem]").first
            expect(root).to_contain_text("score batch")
            expect(root).to_contain_text("open")
            assert root.get_attribute("aria-expanded") is None  # no child yet

            append(
                event(run_id, 2, type="span_started", spanId="p1", parentSpanId="batch", name="posting one")
            )
            expect(root).to_have_attribute("aria-expanded", "false")  # a first child: openable
            root.locator(":scope > .sn-line").click()
            children = root.locator(":scope > [role=group] > [role=treeitem]")
            expect(children).to_have_count(1)
            expect(children.first).to_contain_text("posting one")

            append(
                event(run_id, 3, type="span_started", spanId="p2", parentSpanId="batch", name="posting two"),
                event(
                    run_id, 4, type="span_ended", spanId="p2", status="error", error={"message": "timeout"}
                ),
                event(run_id, 5, type="span_ended", spanId="p1", status="ok", durationMs=1500),
            )
            expect(children).to_have_count(2)
            two = page.locator("#span-tree [data-span-id=p2]")
            expect(two).to_have_attribute("aria-level", "2")
            expect(two.locator(".badge")).to_have_text("error")
            one = page.locator("#span-tree [data-span-id=p1]")
            expect(one.locator(".sn-dur")).to_have_text("1.5 s")
            expect(one).not_to_contain_text("open")
            expect(page.locator("#trace-failed")).to_have_text("1 failed span")
            expect(page.locator("#jump-first-error")).to_be_visible()
            # the live-added span works like the others: selecting it loads its detail
            two.locator(":scope > .sn-line").click()
            expect(page.locator("#span-detail")).to_contain_text("timeout")

            violations = [
                f"{v['id']} ({v['impact']})"
                for v in Axe().run(page).response["violations"]
                if v["impact"] in ("serious", "critical")
            ]
            assert violations == []
            browser.close()
            assert [e for e in errors if "WebSocket connection" not in e] == []
