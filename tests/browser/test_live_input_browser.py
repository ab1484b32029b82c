"""A live refresh never takes what a person is typing (issue 52, the high defect).

Run separately: ``.venv/bin/pytest -m browser tests/browser/test_live_input_browser.py``.
One daphne (SQLite, in-memory layer). Alice types a note into a row of her review inbox; mid-typing
a gate arrives in another run, the inbox refreshes live (the workspace socket), and she goes on
typing. The text, the focus and the caret are those she left, and the decision stores the whole
note. Before the inbox morphed its refreshes (static/workbench/morph.js) the refresh replaced the
row: the field came back empty with the focus in it, and the note was stored cut.
"""

from __future__ import annotations

import httpx
import pytest

from tests.browser.support import launch, require_chromium
from tests.conftest import LINEAR_WORKFLOW
from tests.live.cluster import Cluster

pytestmark = pytest.mark.browser


def gate_requested(api: httpx.Client, run_id: str) -> None:
    events = [
        {
            "id": f"evt_{run_id}_1",
            "runId": run_id,
            "ts": "2026-01-01T00:00:01.000Z",
            "type": "step_started",
            "stepId": "parse",
        },
        {
            "id": f"evt_{run_id}_2",
            "runId": run_id,
            "ts": "2026-01-01T00:00:02.000Z",
            "type": "step_completed",
            "stepId": "parse",
            "ok": True,
        },
        {
            "id": f"evt_{run_id}_3",
            "runId": run_id,
            "ts": "2026-01-01T00:00:03.000Z",
            "type": "human_gate_requested",
            "stepId": "review",
            "gate": "PAUSE_BEFORE",
        },
    ]
    response = api.post(f"/api/runs/{run_id}/events", json={"events": events})
    assert response.status_code == 200, response.text


def caret(page) -> dict:
    return page.evaluate(
        """() => { const e = document.activeElement;
                   return {id: e.id, value: e.value, start: e.selectionStart, end: e.selectionEnd}; }"""
    )


def test_inbox_refresh_keeps_the_note_being_typed():
    from playwright.sync_api import expect, sync_playwright

    require_chromium()
    with Cluster(database="sqlite", servers=1, extra_env={"WORKBENCH_APPROVE_UNDO_MS": "0"}) as cluster:
        seed = cluster.seed(workflow=LINEAR_WORKFLOW, run_id="run_typing_a", users=(("alice", "owner"),))
        base = cluster.url(0, "")
        api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {seed['token']}"}, timeout=30)
        gate_requested(api, "run_typing_a")
        cluster.python(
            "from runs import actions\nfrom runs.models import Workspace\n"
            f"wf = {LINEAR_WORKFLOW!r}\n"
            "actions.do_start_run(workspace=Workspace.objects.get(slug='acme'), workflow=wf, "
            "actor='user:seed', run_id='run_typing_b', title='Second letter')\n"
        )
        with sync_playwright() as p:
            browser = launch(p)
            errors: list[str] = []
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.add_cookies([{"name": "sessionid", "value": seed["sessions"]["alice"], "url": base}])
            page = context.new_page()
            page.on("console", lambda m: m.type == "error" and errors.append(m.text))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{base}/runs/inbox/")
            expect(page.locator("html")).to_have_attribute("data-workspace-live", "open")
            rows = page.locator("tr[data-run]")
            expect(rows).to_have_count(1)
            note = page.locator('tr[data-run="run_typing_a"] input[name=note]')
            note_id = note.get_attribute("id")
            note.click()
            page.keyboard.type("tone cold", delay=20)
            for _ in range(5):
                page.keyboard.press("ArrowLeft")  # the caret before " cold"
            assert caret(page) == {"id": note_id, "value": "tone cold", "start": 4, "end": 4}

            # a gate arrives in another run: the inbox refreshes live while the note is being typed
            gate_requested(api, "run_typing_b")
            expect(rows).to_have_count(2)
            page.wait_for_timeout(300)  # the swap has settled
            assert caret(page) == {"id": note_id, "value": "tone cold", "start": 4, "end": 4}

            page.keyboard.type(" too", delay=20)
            assert caret(page) == {"id": note_id, "value": "tone too cold", "start": 8, "end": 8}
            page.locator('tr[data-run="run_typing_a"] button[value=approved]').click()
            # the decided row may be refreshed away at once (the run no longer waits): ask the API
            notes: list = []
            for _ in range(50):
                run = api.get("/api/runs/run_typing_a/events").json()
                notes = [
                    e["event"].get("note")
                    for e in run["events"]
                    if e["event"]["type"] == "human_gate_resolved"
                ]
                if notes:
                    break
                page.wait_for_timeout(200)
            browser.close()
        assert notes == ["tone too cold"], notes
        assert errors == []
