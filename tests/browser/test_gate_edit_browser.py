"""“Approve with edits” in Chromium through the artifact's schema form.

A reviewer opens a run waiting at a gate whose artifact (job.profile) has a JSON Schema: the edit
is a form prefilled from the current version. A value the schema refuses is said in words next to
its field as soon as the reviewer leaves it (before any submit), and again by the server when the
reviewer submits anyway: nothing is recorded and what was typed stays. Fixed, the decision is
recorded as "edited" with the change as a JSON Patch of the artifact (read from the database).
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.browser.support import launch, new_page, serve_app, shot, sign_in
from tests.browser.test_shell_browser import overflow, serious

pytestmark = pytest.mark.browser

SETUP = """
import django; django.setup()
from django.contrib.auth import get_user_model
from runs import actions
from runs.engine import commands as c
from runs.actions.workspaces import add_member, get_or_create_workspace
ws = get_or_create_workspace("acme", name="Acme")
add_member(ws, get_user_model().objects.create_user("bob", password="bob-password-123"), "reviewer")
wf = {"id": "wf-profile", "version": 1, "title": "Parse, review, publish",
      "steps": [{"id": "parse"}, {"id": "review", "gatePolicy": "PAUSE_BEFORE"}, {"id": "publish"}],
      "edges": [{"id": "e1", "from": "parse", "to": "review"}, {"id": "e2", "from": "review", "to": "publish"}]}
for run_id in ("run_profile", "run_profile_look"):
    actions.do_start_run(workspace=ws, workflow=wf, actor="pipeline", run_id=run_id)
    for cmd in (c.BeginStep("parse"),
                c.WriteArtifact(key="profile", type_id="job.profile",
                                data={"headline": "Engineer", "skills": ["python", "sql"], "summary": "Builds things.",
                                      "yearsOfExperience": 4}),
                c.CompleteStep("parse")):
        actions.do_command(workspace=ws, run_id=run_id, command=cmd, actor="pipeline")
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gate-edit-browser")
    with serve_app(tmp, setup_code=SETUP) as url:
        yield {"url": url, "db": tmp / "db.sqlite3"}


def _events(db, kind: str) -> list[dict]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT body FROM runs_event WHERE type = ? ORDER BY seq", (kind,)).fetchall()
    return [json.loads(body) for (body,) in rows]


def test_approve_with_edits_from_the_prefilled_schema_form(server):
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = new_page(browser, viewport={"width": 1280, "height": 900})
            sign_in(page, server["url"], "bob")
            page.goto(f"{server['url']}/runs/run_profile/")
            gate = page.locator("#gate-panel .gate").first
            gate.locator("details[data-edit] > summary").click()
            # the form, prefilled from the current version (not an empty JSON box)
            expect(page.locator("#g1-f-headline")).to_have_value("Engineer")
            expect(page.locator("#g1-f-skills")).to_have_value("python\nsql")
            expect(page.locator("#g1-f-yearsOfExperience")).to_have_value("4")
            assert gate.locator("textarea[name=edit_data]").count() == 0
            # a value the schema refuses: said in words next to the field before any submit
            page.fill("#g1-f-yearsOfExperience", "-3")
            page.fill("#g1-f-headline", "Staff engineer")  # leaving the field checks it
            years = page.locator("#g1-f-yearsOfExperience")
            expect(years).to_have_attribute("aria-invalid", "true")
            expect(page.locator("#g1-f-yearsOfExperience-err")).to_have_text("Enter a value of at least 0.")
            expect(page.locator("#g1-f-headline")).to_have_value("Staff engineer")  # the check kept it
            shot(page, "gate-edit-inline-error")
            # submitted anyway: the server refuses with the same words, records nothing, keeps the input
            gate.locator("textarea[name=note]").fill("sharper headline")
            gate.locator("button[value=edited]").click()
            expect(page.locator("#gate-panel .field-error[role=alert]")).to_contain_text(
                "yearsOfExperience: Enter a value of at least 0."
            )
            expect(page.locator("#g1-f-yearsOfExperience-err")).to_have_text("Enter a value of at least 0.")
            expect(page.locator("#g1-f-headline")).to_have_value("Staff engineer")
            expect(page.locator("#g1-f-yearsOfExperience")).to_have_value("-3")
            expect(gate.locator("textarea[name=note]")).to_have_value("sharper headline")
            assert _events(server["db"], "human_gate_resolved") == []
            assert _events(server["db"], "artifact_patch") == []
            assert "No gate decisions yet." in page.locator("#gate-panel .history").inner_text()
            # fixed: approved with the edit, recorded as a patch of version 1
            page.fill("#g1-f-yearsOfExperience", "6")
            page.locator("#gate-panel .gate").first.locator("button[value=edited]").click()
            expect(page.locator("#gate-panel")).to_contain_text("No gate is waiting")
            expect(page.locator("#gate-panel .history")).to_contain_text("edited")
            (patch,) = _events(server["db"], "artifact_patch")
            assert patch["artifactKey"] == "profile" and patch["fromVersion"] == 1
            assert sorted(patch["patch"], key=lambda op: op["path"]) == [
                {"op": "replace", "path": "/headline", "value": "Staff engineer"},
                {"op": "replace", "path": "/yearsOfExperience", "value": 6},
            ]
            (decided,) = _events(server["db"], "human_gate_resolved")
            assert decided["decision"] == "edited" and decided["note"] == "sharper headline"
            shot(page, "gate-edit-approved")
            assert page.console_errors == [], page.console_errors
        finally:
            browser.close()


def test_the_open_gate_form_with_an_error_fits_a_phone_and_passes_axe_in_light_and_dark(server):
    from playwright.sync_api import expect, sync_playwright

    problems: list[str] = []
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            for width in (1280, 390):
                for scheme in ("light", "dark"):
                    page = new_page(browser, viewport={"width": width, "height": 900}, color_scheme=scheme)
                    sign_in(page, server["url"], "bob")
                    page.goto(f"{server['url']}/runs/run_profile_look/")
                    page.locator("#gate-panel details[data-edit] > summary").first.click()
                    page.fill("#g1-f-headline", "")
                    page.locator("#g1-f-summary").focus()  # leaving the field checks it
                    expect(page.locator("#g1-f-headline-err")).to_have_text("This field cannot be empty.")
                    label = f"gate form {width} {scheme}"
                    if width == 390 and overflow(page) > 0:
                        problems.append(f"{label}: {overflow(page)} px wider than the screen")
                    problems += serious(page, label)
                    shot(page, f"gate-edit-form-{width}{'-dark' if scheme == 'dark' else ''}")
                    problems += [f"console: {e}" for e in page.console_errors]
                    page.context.close()
        finally:
            browser.close()
    assert problems == []
