"""The compare page in Chromium: picked from the runs list (with and without JavaScript), the first
divergence linked and targeted, a fork compared with its source, htmx paging, hostile run ids in the
URL, and axe-core (light and dark) with no serious or critical violation.

One daphne server for the module. Screenshots go to test-results/screenshots/compare-*.png.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest

from tests.browser import support
from tests.browser.support import serve_app

pytestmark = pytest.mark.browser

HOSTILE = 'run <b>x</b> & "q"/?#%20'
DEMO_FORK = "run_demo_jobsearch_retry"  # runs.demo.job_search.DEMO_FORK_RUN_ID
SETUP = f"""
import django; django.setup()
from django.contrib.auth import get_user_model
from runs import actions
from runs.actions.forks import do_fork_with_history
from runs.engine import commands as c
from runs.actions.workspaces import add_member, get_or_create_workspace
ws = get_or_create_workspace("acme", name="Acme")
add_member(ws, get_user_model().objects.create_user("rita", password="rita-password-123"), "owner")
wf = {{"id": "wf-cmp", "version": 1, "title": "Draft and review",
      "steps": [{{"id": "draft"}}, {{"id": "review", "gatePolicy": "PAUSE_BEFORE"}}],
      "edges": [{{"id": "e1", "from": "draft", "to": "review"}}]}}
def run(run_id, answer, tokens, decision, notes=0):
    actions.do_start_run(workspace=ws, workflow=wf, actor="pipeline", run_id=run_id)
    cmds = [c.BeginStep("draft")]
    cmds += [c.Annotate(text=f"progress {{i}}", step_id="draft") for i in range(notes)]
    cmds += [
        c.LogModelIO(direction="request", provider="anthropic", model="claude-haiku", step_id="draft",
                     payload={{"messages": [{{"role": "user", "content": "Write the cover letter"}}]}}),
        c.LogModelIO(direction="response", provider="anthropic", model="claude-haiku", step_id="draft",
                     usage={{"inputTokens": 200, "outputTokens": tokens}}, cost={{"amount": tokens / 10000, "currency": "USD"}},
                     duration_ms=400 + tokens, payload={{"content": [{{"type": "text", "text": answer}}]}}),
        c.WriteArtifact(key="letter", type_id="json.letter", data={{"greeting": answer.split()[0], "length": tokens}}),
        c.CompleteStep("draft"),
        c.ResolveGate(step_id="review", gate="PAUSE_BEFORE", decision=decision),
    ]
    actions.do_commands(workspace=ws, run_id=run_id, commands=cmds, actor="pipeline")
run("run_monday", "Dear team, I build <script>alert(1)</script> reliable systems.", 120, "approved", notes=150)
run("run_tuesday", "Dear hiring manager, I build reliable systems.", 90, "rejected", notes=150)
run({HOSTILE!r}, "Hello there.", 10, "approved")
fork = do_fork_with_history(workspace=ws, source_run_id="run_monday", mode="branch", from_seq=100, executable=False,
                   new_run_id="run_monday_branch")
actions.do_commands(workspace=ws, run_id="run_monday_branch", actor="pipeline",
                    commands=[c.Annotate(text="the branch goes its own way", step_id="draft")])
from runs.demo.job_search import build_demo
build_demo(ws)
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serve_app(tmp_path_factory.mktemp("compare"), setup_code=SETUP) as url:
        yield url


@pytest.fixture(scope="module")
def page(server):
    with support.signed_in_page(server, "rita", viewport={"width": 1280, "height": 900}) as pg:
        yield pg


def axe_violations(page) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    out = []
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for v in Axe().run(page).response["violations"]:
            if v["impact"] in ("serious", "critical"):
                out.append(f"{scheme}: {v['id']} ({v['impact']}) {[n['target'] for n in v['nodes'][:3]]}")
    page.emulate_media(color_scheme="light")
    return out


def test_pick_two_runs_in_the_list_and_follow_the_first_divergence(page, server):
    page.goto(f"{server}/runs/")
    assert axe_violations(page) == []  # the list with its checkboxes
    page.check('input[name=run][value="run_monday"]')
    # a live refresh of the table (what the workspace socket triggers) keeps the ticked box ticked
    with page.expect_response(lambda r: "/runs/" in r.url and "run=run_monday" in r.url):
        page.evaluate("() => document.body.dispatchEvent(new CustomEvent('live:runs-changed'))")
    page.wait_for_selector('input[name=run][value="run_monday"]:checked')
    page.check('input[name=run][value="run_tuesday"]')
    page.click("text=Compare the two selected runs")
    page.wait_for_url(re.compile(r"/compare/\?a="))
    query = parse_qs(urlparse(page.url).query)
    assert query["a"] == ["run_monday"] and query["b"] == ["run_tuesday"]  # older first, shareable
    assert page.locator("del", has_text="team,").count() == 1
    assert page.locator("ins", has_text="hiring manager,").count() == 1
    assert page.locator("script", has_text="alert(1)").count() == 0  # the output's markup is text
    assert "PAUSE_BEFORE: rejected" in page.inner_text(".cmp-steps")
    assert "−30 (−25.0%)" in page.inner_text(".cmp-totals")  # output tokens 120 -> 90
    page.click("#divergence a")
    page.wait_for_url(re.compile(r"pos=\d+\.\d+#first-divergence$"))
    target = page.locator("tr:target")
    assert target.count() == 1 and target.get_attribute("id") == "first-divergence"
    assert "first divergence" in target.inner_text()
    assert target.evaluate("el => el.getBoundingClientRect().top") < 900  # scrolled into view
    support.shot(page, "compare-first-divergence")
    assert axe_violations(page) == []
    assert page.console_errors == []


def test_a_fork_compared_with_its_source_and_paged_with_htmx(page, server):
    page.goto(f"{server}/runs/run_monday_branch/")
    page.click("#compare-with-source")
    page.wait_for_selector(".cmp-prefix")
    assert "Identical history up to seq 99 (seqs 1–99 copied into the fork)" in page.inner_text(".cmp-prefix")
    rows = page.locator("#aligned tbody tr")
    assert "fork marker" in rows.nth(1).inner_text()  # run_forked: shown, not a difference
    divergence = page.inner_text("#first-divergence")
    assert "the branch goes its own way" in divergence and "changed" in divergence
    support.shot(page, "compare-fork")
    page.click(".cmp-prefix a")  # the whole history, from seq 1
    page.wait_for_url(re.compile(r"pos=0\.0"))
    assert "identical events (A #1–#" in page.inner_text("#aligned tbody tr.cmp-fold >> nth=0")
    first = rows.first.inner_text()
    page.click("text=Next rows →")  # htmx swaps the rows and pushes the URL
    page.wait_for_url(re.compile(r"pos=[1-9]\d*\.[1-9]\d*"))
    page.wait_for_function(
        "first => document.querySelector('#aligned tbody tr').innerText !== first", arg=first
    )
    assert page.locator("h1", has_text="Compare runs").count() == 1  # the page around it stayed
    support.shot(page, "compare-fork-next-page")
    assert axe_violations(page) == []
    assert page.console_errors == []


def test_the_list_form_works_without_javascript_and_hostile_ids_round_trip(page, server):
    pg = support.new_page(page.context.browser, java_script_enabled=False)
    try:
        support.sign_in(pg, server, "rita")
        pg.goto(f"{server}/runs/")
        css_value = HOSTILE.replace("\\", "\\\\").replace('"', '\\"')
        pg.check(f'input[name=run][value="{css_value}"]')
        pg.check('input[name=run][value="run_tuesday"]')
        pg.click("text=Compare the two selected runs")
        pg.wait_for_url(re.compile(r"/compare/\?a="))
        query = parse_qs(urlparse(pg.url).query)
        assert sorted([query["a"][0], query["b"][0]]) == sorted([HOSTILE, "run_tuesday"])
        assert HOSTILE in pg.inner_text(".cmp-summary")
        assert pg.locator(".cmp-summary b").count() == 0
        support.shot(pg, "compare-no-js-hostile-id")
        assert pg.console_errors == []
    finally:
        pg.context.close()


def test_the_demo_fork_compared_with_its_source_diverges_at_the_fork_point(page, server):
    """The demo's fork from state (runs.demo.job_search): the artifacts it carried in before its
    run_forked marker are collapsed copied history; the first divergence is its own annotation."""
    page.goto(f"{server}/runs/{DEMO_FORK}/")
    page.click("#compare-with-source")
    page.wait_for_selector("#first-divergence")
    copied = page.locator("tr.cmp-copied details")
    assert copied.count() == 1 and copied.get_attribute("open") is None  # collapsed
    assert "Copied history" in copied.inner_text() and "run_forked" in copied.inner_text()
    marker = int(page.locator("tr.cmp-marker td.mono >> nth=1").inner_text())
    divergence = page.inner_text("#divergence")
    assert f"B #{marker + 1}" in divergence and "B #1 " not in divergence
    assert "Forked to retry the parse" in page.inner_text("#first-divergence")
    page.click("#divergence a")
    page.wait_for_url(re.compile(r"#first-divergence$"))
    assert page.locator("tr:target").get_attribute("id") == "first-divergence"
    # the compare anchor round-trips: the shared link opens on the fork point's row
    shared = page.url
    page.goto("about:blank")
    page.goto(shared)
    assert page.locator("tr:target").get_attribute("id") == "first-divergence"
    assert "Forked to retry the parse" in page.locator("tr:target").inner_text()
    support.shot(page, "compare-demo-fork")
    assert axe_violations(page) == []
    page.set_viewport_size({"width": 390, "height": 800})
    assert axe_violations(page) == []  # light and dark at 390 px
    page.set_viewport_size({"width": 1280, "height": 900})
    assert page.console_errors == []
