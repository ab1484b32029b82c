"""The page shell in Chromium (issue 52): the grouped sidebar at 1280 px and its menu button at 390 px,
the workspace switcher that switches on choice, the keyboard "go to" (Ctrl-K), the run page's waiting
gate in view without scrolling, no page wider than 390 px at 390 px, axe-core (0 serious or
critical) in light and dark at both widths, and a screenshot of every page kind at both widths
(test-results/screenshots/shell-<page>-<width>[-dark].png, or under WORKBENCH_SCREENSHOTS).

One daphne server seeded by ``manage.py demo_data`` (the job-search runs, one waiting at a gate, and
the 10k-event batch run).
"""

from __future__ import annotations

import json
import re

import pytest

from tests.browser import support
from tests.browser.support import serve_app

pytestmark = pytest.mark.browser

SETUP = """
import django; django.setup()
from django.contrib.auth import get_user_model
from django.core.management import call_command
from runs.actions.workspaces import add_member, get_or_create_workspace
call_command("demo_data", url="http://127.0.0.1/")
rita = get_user_model().objects.create_user("rita", password="rita-password-123")
add_member(get_or_create_workspace("demo"), rita, "owner")
add_member(get_or_create_workspace("side", name="Side project"), rita, "viewer")
from runs.actions.monitors import do_create_monitor, evaluate_monitors
do_create_monitor(workspace=get_or_create_workspace("demo"), data={"name": "Errors", "metric": "error_rate", "warning": 0, "alert": 50, "windowDays": 30})
evaluate_monitors()
# the Build and Review pages with something on them: a dataset, a baseline and a candidate experiment
# (one item failed with its reason), a review queue, a prompt, a gate judge
import json, os
from decimal import Decimal
from django.utils import timezone
from evals import actions as evals_actions
from evals.actions.experiments import summarize
from evals.models import Experiment, ExperimentItem
from judges.actions import do_create_judge
from review.actions import do_add_items, do_create_queue
from runs.actions.permissions import ROLE_SCOPES
from runs.actions.prompts import do_save_prompt_version
from runs.models import Event
ws = get_or_create_workspace("demo")
ds = evals_actions.do_create_dataset(workspace=ws, name="Draft replies", description="decided drafts")
evals_actions.do_add_items(dataset=ds, items=[
    {"id": f"item-{i}", "input": {"ticket": i}, "expected": {"text": f"reply {i}"}} for i in range(3)])
def experiment(pid, name, scores, baseline=None):
    e = Experiment.objects.create(public_id=pid, workspace=ws, dataset=ds, as_of_revision=1, name=name,
        change={"configurable": {"draftModel": name}} if baseline else {}, evaluator={"kind": "exact"},
        baseline=baseline, status="completed", created_at=timezone.now(), finished_at=timezone.now())
    for i, s in enumerate(scores):
        failed = s is None
        ExperimentItem.objects.create(experiment=e, item_key=f"item-{i}", status="failed" if failed else "completed",
            score=s, output="" if failed else '{"text":"reply %d"}' % i, cost=Decimal("0.01"), provider_calls=1,
            latency_ms=120 + i, error="NOT_EXECUTABLE: the workbench has no step code for this workflow" if failed else "")
    e.summary = summarize(e)
    e.save()
    return e
base = experiment("exp_shell_base", "baseline", [1, 1, 0])
experiment("exp_shell_cand", "haiku", [1, None, 0.5], baseline=base)
q = do_create_queue(workspace=ws, name="Letters", instructions="Is the letter ready to send?", score_configs=[
    {"name": "send", "dataType": "BOOLEAN", "description": "Ready to send"}])
q.queue_id = "q_shell"; q.save()
do_add_items(queue=q, items=[{"runId": "run_demo_jobsearch"}])
do_save_prompt_version(ws, name="support/greeting", body="Hello {{customer}}.", scopes=ROLE_SCOPES["owner"],
    user=rita, message="first")
judge = do_create_judge(workspace=ws, name="errors", kind="rule", workflow_id="wf-demo", step_id="review",
    gate="PAUSE_BEFORE", config={"rules": {"errors": True}, "onMatch": "rejected"})
batch = Event.objects.filter(run__run_id="run_demo_nightly_batch")
# the pages that need more than an id: a queue item, an OAuth consent, a signed gate link, an import job
from datetime import timedelta
from urllib.parse import urlencode
from oauth2_provider.models import get_application_model
from review.models import Item
from runs.actions.gatelinks import token_hash
from runs.models import Run
from runs.models_gatelinks import GateLink
from runs.models_imports import ImportJob
from runs.selectors.runs import run_state
host = get_application_model().objects.create(name="Notes host", client_type="public",
    authorization_grant_type="authorization-code", redirect_uris="http://127.0.0.1:8765/callback")
consent = urlencode({"response_type": "code", "client_id": host.client_id, "scope": "read",
    "redirect_uri": "http://127.0.0.1:8765/callback", "state": "s1", "code_challenge_method": "S256",
    "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"})
waiting_run = Run.objects.filter(workspace=ws, pending_gates__gt=0).order_by("pk").first()
pending = run_state(waiting_run).pending_gates()[0]
link_token = "shell-gate-link-token-0123456789abcdef"
GateLink.objects.create(token_hash=token_hash(link_token), workspace=ws, run=waiting_run,
    step_id=pending["stepId"], gate=pending["gate"], checkpoint=pending.get("checkpoint") or "",
    recipient=rita, expires_at=timezone.now() + timedelta(days=1))
ImportJob.objects.create(job_id="imp_shell", workspace=ws, status="running", file="x.json", size=2_000_000,
    bytes_read=700_000, events=1200, created_by="user:rita", started_at=timezone.now())
ids = {
    "item": Item.objects.filter(queue=q).values_list("item_id", flat=True).first(),
    "consent": consent,
    "link": link_token,
    "dataset": ds.public_id,
    "judge": judge.judge_id,
    "span": batch.filter(type="span_started").order_by("seq").values_list("seq", flat=True)[1],
    "event": batch.order_by("seq").values_list("seq", flat=True)[3],
}
open(os.path.join(os.environ["WORKBENCH_VAR_DIR"], "ids.json"), "w").write(json.dumps(ids))
"""

WAITING_RUN = "run_demo_waiting"  # replaced by the fixture with the demo's run waiting at a gate
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}

# Every page kind, by a name for its screenshot ({waiting}: the demo's run waiting at a gate; {span},
# {event}, {dataset}, {judge}, {item}, {link}, {consent}: ids the setup wrote to ids.json).
PAGES = {
    # Observe
    "runs": "/runs/",
    "runs-sorted": "/runs/?sort=-cost",
    "run": "/runs/{waiting}/",
    "run-batch": "/runs/run_demo_nightly_batch/",
    "span-detail": "/runs/run_demo_nightly_batch/?span={span}#trace",
    "timeline": "/runs/run_demo_nightly_batch/timeline/",
    "event": "/runs/run_demo_nightly_batch/events/{event}/",
    "run-artifacts": "/runs/{waiting}/artifacts/",
    "run-rules": "/runs/{waiting}/rules/",
    "run-annotations": "/runs/{waiting}/annotations/",
    "run-ledger": "/runs/run_demo_nightly_batch/ledger/",
    "fork": "/runs/run_demo_jobsearch/fork/",
    "determinism": "/runs/run_demo_jobsearch/determinism/",
    "compare": "/compare/?a=run_demo_jobsearch&b=run_demo_nightly_batch",
    "dashboard": "/dashboard/",
    "monitors": "/monitors/",
    "ledger": "/ledger/",
    "import": "/import/",
    "import-job": "/import/jobs/imp_shell/",
    "artifact-diff": "/runs/run_demo_jobsearch/artifacts/diff/?key=profile&a=1&b=2",
    # Review
    "inbox": "/runs/inbox/",
    "queues": "/review/",
    "queue": "/review/q_shell/",
    "queue-item": "/review/q_shell/items/{item}/",
    "gate-link": "/gate-links/{link}/?decision=approved",
    # Build
    "playground": "/playground/",
    "playground-settings": "/playground/settings/",
    "prompts": "/prompts/",
    "prompt": "/prompts/support/greeting/",
    "datasets": "/evals/datasets/",
    "dataset": "/evals/datasets/{dataset}/",
    "experiment": "/evals/experiments/exp_shell_cand/",
    "new-experiment": "/evals/experiments/new/?prompt=support/greeting@1",
    "judges": "/judges/",
    "judge": "/judges/{judge}/",
    # Settings
    "members": "/members/",
    "tokens": "/workspace/tokens/",
    "webhooks": "/settings/webhooks/",
    "notifications": "/settings/notifications/",
    "invitations": "/workspace/invitations/",
    "gate-policies": "/settings/gate-policies/",
    "budgets": "/settings/budgets/",
    "slack": "/settings/slack/",
    "signing-keys": "/settings/signing-keys/",
    "oauth-consent": "/oauth/authorize/?{consent}",
    "api-docs": "/api/docs",
}
# Pages for someone not signed in.
PUBLIC_PAGES = {"login": "/accounts/login/", "demo": "/runs/demo"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("shell")
    with serve_app(tmp, setup_code=SETUP) as url:
        yield url, json.loads((tmp / "ids.json").read_text())


@pytest.fixture(scope="module")
def server(served) -> str:
    return served[0]


@pytest.fixture(scope="module")
def ids(served) -> dict:
    return served[1]


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    support.require_chromium()
    with sync_playwright() as pw:
        chromium = support.launch(pw)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def waiting(browser, server) -> str:
    """The id of a demo run that waits at a gate (from the inbox)."""
    page = signed_in(browser, server, viewport=DESKTOP)
    page.goto(f"{server}/runs/inbox/")
    run_id = page.locator("tr[data-run]").first.get_attribute("data-run")
    page.context.close()
    assert run_id
    return run_id


def signed_in(browser, server, **options):
    page = support.new_page(browser, **options)
    support.sign_in(page, server, "rita")
    return page


def overflow(page) -> int:
    """How many CSS pixels the page is wider than its viewport."""
    return page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")


def serious(page, label: str) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    return [
        f"{label}: {v['id']} ({v['impact']}) {[n['target'] for n in v['nodes'][:3]]}"
        for v in Axe().run(page).response["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def test_sidebar_groups_at_1280_and_menu_button_at_390(browser, server):
    from playwright.sync_api import expect

    page = signed_in(browser, server, viewport=DESKTOP)
    page.goto(f"{server}/runs/")
    sidebar = page.locator("#sidebar")
    expect(sidebar).to_be_visible()
    assert [h.strip() for h in sidebar.locator("h2.nav-group").all_text_contents()] == [
        "Observe",
        "Review",
        "Build",
        "Settings",
    ]
    review = sidebar.locator('ul[aria-labelledby="nav-review"] a')
    assert review.first.inner_text().startswith("Inbox")
    expect(review.first.locator(".nav-count")).to_be_visible()  # the inbox counts what waits
    expect(sidebar.locator('a[aria-current="page"]')).to_have_text("Runs")
    expect(page.locator("#menu-button")).to_be_hidden()
    box = sidebar.bounding_box()
    assert box and box["x"] == 0 and box["width"] < 300  # a left column, beside the page
    assert page.locator("main").bounding_box()["x"] >= box["width"]
    # hidden by its button (remembered), brought back by the menu button
    page.click("[data-sidebar-close]")
    expect(sidebar).to_be_hidden()
    expect(page.locator("#menu-button")).to_be_focused()
    page.reload()
    expect(sidebar).to_be_hidden()
    page.click("#menu-button")
    expect(sidebar).to_be_visible()
    page.context.close()

    page = signed_in(browser, server, viewport=PHONE)
    page.goto(f"{server}/runs/")
    menu = page.locator("#menu-button")
    expect(sidebar := page.locator("#sidebar")).to_be_hidden()
    expect(menu).to_be_visible()
    expect(menu).to_have_attribute("aria-expanded", "false")
    header = page.locator("header.topbar").bounding_box()
    assert header and header["height"] <= 64  # one row, not five
    menu.click()
    expect(sidebar).to_be_visible()
    expect(menu).to_have_attribute("aria-expanded", "true")
    assert sidebar.bounding_box()["width"] <= 390
    support.shot(page, "shell-menu-open-390")
    page.keyboard.press("Escape")
    expect(sidebar).to_be_hidden()
    expect(menu).to_be_focused()
    menu.click()
    page.locator("#sidebar a", has_text="Ledger").click()
    page.wait_for_url(f"{server}/ledger/")
    expect(page.locator("#sidebar")).to_be_hidden()
    assert page.console_errors == []
    page.context.close()


def test_workspace_switcher_switches_on_choice(browser, server):
    from playwright.sync_api import expect

    page = signed_in(browser, server, viewport=DESKTOP)
    page.goto(f"{server}/runs/inbox/")
    expect(page.locator(".ws-switch-fallback")).to_be_hidden()  # no "Switch" button with scripts
    page.select_option("#ws-select", "side")
    page.wait_for_url(f"{server}/runs/")
    expect(page.locator(".messages")).to_contain_text("Switched to Side project")
    expect(page.locator("#ws-select")).to_have_value("side")
    page.select_option("#ws-select", "demo")
    expect(page.locator(".messages")).to_contain_text("Switched to Demo")
    page.context.close()


def test_workspace_switcher_waits_for_enter_or_leaving_from_the_keyboard(browser, server):
    """An arrow key on the closed select changes its value (and Chromium fires change): that is
    browsing, not a choice. Enter switches; so does Tab away with another workspace chosen; a
    field left unchanged, or Enter on the current workspace, switches nothing."""
    from playwright.sync_api import expect

    page = signed_in(browser, server, viewport=DESKTOP)
    page.goto(f"{server}/runs/inbox/")
    select = page.locator("#ws-select")
    values = select.locator("option").evaluate_all("os => os.map(o => o.value)")
    current = select.input_value()
    other = next(v for v in values if v != current)
    toward = "ArrowDown" if values.index(other) > values.index(current) else "ArrowUp"
    back = "ArrowUp" if toward == "ArrowDown" else "ArrowDown"

    select.focus()
    page.keyboard.press("Enter")  # nobody chose anything: nothing is sent
    page.keyboard.press(toward)
    expect(select).to_have_value(other)  # the arrow moved the value...
    page.wait_for_timeout(700)
    assert page.url == f"{server}/runs/inbox/"  # ...and switched nothing
    expect(select).to_be_focused()
    page.keyboard.press(back)
    page.keyboard.press(toward)
    page.wait_for_timeout(300)
    assert page.url == f"{server}/runs/inbox/"
    page.keyboard.press("Enter")
    page.wait_for_url(f"{server}/runs/")
    expect(page.locator(".messages")).to_contain_text("Switched to")
    expect(page.locator("#ws-select")).to_have_value(other)

    # back by the keyboard again: an arrow, then Tab leaves the field with the other value chosen
    page.goto(f"{server}/runs/inbox/")
    page.locator("#ws-select").focus()
    page.keyboard.press(back)
    page.wait_for_timeout(300)
    assert page.url == f"{server}/runs/inbox/"
    page.keyboard.press("Tab")
    page.wait_for_url(f"{server}/runs/")
    expect(page.locator("#ws-select")).to_have_value(current)

    # Tab through the field without changing it, and Escape after an arrow: no switch
    page.goto(f"{server}/runs/inbox/")
    page.locator("#ws-select").focus()
    page.keyboard.press("Tab")
    page.locator("#ws-select").focus()
    page.keyboard.press(toward)
    page.keyboard.press("Escape")
    expect(page.locator("#ws-select")).to_have_value(current)
    page.keyboard.press("Tab")
    page.wait_for_timeout(700)
    assert page.url == f"{server}/runs/inbox/"
    assert page.console_errors == []
    page.context.close()


def test_ctrl_k_goes_to_a_run_by_title_or_id_and_to_pages(browser, server, waiting):
    from playwright.sync_api import expect

    page = signed_in(browser, server, viewport=DESKTOP)
    page.goto(f"{server}/runs/inbox/")
    page.locator("[data-review-fallback]").focus()
    page.keyboard.press("Control+k")
    dialog = page.locator("dialog#goto")
    expect(dialog).to_be_visible()
    expect(page.locator("#goto-q")).to_be_focused()
    # Escape closes, focus goes back where it was
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert page.evaluate("() => document.activeElement.hasAttribute('data-review-fallback')")
    # a page by its name
    page.keyboard.press("Control+k")
    page.keyboard.type("queues")
    expect(page.locator("#goto-results [role=option]").first).to_contain_text("Queues")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{server}/review/")
    # a run by (part of) its id, with the arrow keys
    page.keyboard.press("Control+k")
    page.keyboard.type("nightly_batch")
    options = page.locator("#goto-results [role=option]")
    expect(options.filter(has_text="run_demo_nightly_batch")).to_have_count(1)
    expect(page.locator("#goto-q")).to_have_attribute("aria-activedescendant", re.compile("goto-opt-"))
    expect(page.locator('#goto-results [aria-selected="true"]')).to_contain_text("run_demo_nightly_batch")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{server}/runs/run_demo_nightly_batch/")
    # a run by a word of its title (the waiting run's own title)
    title = page.evaluate(
        "async (id) => (await (await fetch('/goto/?q=' + id)).json()).runs[0].title", waiting
    )
    page.keyboard.press("Meta+k")
    page.keyboard.type(title.split()[0])
    expect(options.filter(has_text=waiting).first).to_be_visible()
    page.keyboard.press("Escape")
    page.close()
    # another workspace's runs are not offered
    other = signed_in(browser, server, viewport=DESKTOP)
    other.goto(f"{server}/runs/inbox/")
    other.select_option("#ws-select", "side")
    other.wait_for_url(f"{server}/runs/")
    found = other.evaluate("async () => (await (await fetch('/goto/?q=run_demo')).json()).runs")
    assert found == []
    assert page.console_errors == [] and other.console_errors == []
    other.context.close()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_waiting_gate_is_in_view_without_scrolling(browser, server, waiting, viewport):
    page = signed_in(browser, server, viewport=viewport)
    page.goto(f"{server}/runs/{waiting}/")
    gate = page.locator("#gate-panel .gate").first
    box = gate.bounding_box()
    assert box, "no waiting gate on the run page"
    height, width = viewport["height"], viewport["width"]
    assert 0 <= box["y"] and box["y"] + box["height"] <= height, (box, viewport)
    assert 0 <= box["x"] and box["x"] + box["width"] <= width, (box, viewport)
    # the actions menu: closed at first, opens from the keyboard, holds the exports and cancel
    menu = page.locator("details#run-actions")
    assert menu.get_attribute("open") is None
    menu.locator("summary.button").focus()
    page.keyboard.press("Enter")
    assert menu.get_attribute("open") is not None
    assert menu.locator("a", has_text="Export signed bundle").is_visible()
    assert menu.locator("#export-redact").is_visible()
    assert menu.locator("button", has_text="Cancel run").is_visible()
    assert overflow(page) <= 0
    assert page.console_errors == []
    page.context.close()


def check_pages(
    page, base: str, pages: dict[str, str], viewport: dict, scheme: str, prefix: str = "shell"
) -> list[str]:
    """Each page: no wider than the phone at 390 px, axe-core with nothing serious or critical, a
    full-page screenshot (<prefix>-<name>-<width>[-dark].png); what is wrong, as lines."""
    problems: list[str] = []
    for name, path in pages.items():
        response = page.goto(base + path)
        label = f"{name} {viewport['width']} {scheme}"
        if response is None or response.status >= 400:
            problems.append(f"{label}: status {response and response.status}")
            continue
        page.wait_for_load_state("load")
        if viewport["width"] == 390 and overflow(page) > 0:
            problems.append(f"{label}: {overflow(page)} px wider than the screen ({widest(page)})")
        problems += serious(page, label)
        support.shot(page, f"{prefix}-{name}-{viewport['width']}" + ("-dark" if scheme == "dark" else ""))
    return problems


def widest(page) -> str:
    """The element that sticks out furthest to the right (for the message)."""
    return page.evaluate(
        """() => { let best = null, right = 0;
        for (const el of document.querySelectorAll('body *')) {
          const r = el.getBoundingClientRect().right;
          if (r > right + 0.5) { right = r; best = el; } }
        return best ? `${best.tagName.toLowerCase()}${best.id ? '#' + best.id : ''}.${[...best.classList].join('.')} right=${Math.round(right)}` : ''; }"""
    )


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_every_page_fits_passes_axe_in_light_and_dark_and_is_screenshot(
    browser, server, waiting, ids, viewport, scheme
):
    pages = {name: path.format(waiting=waiting, **ids) for name, path in PAGES.items()}
    page = signed_in(browser, server, viewport=viewport, color_scheme=scheme)
    problems = check_pages(page, server, pages, viewport, scheme)
    problems += [f"console: {e}" for e in page.console_errors]
    page.context.close()
    visitor = support.new_page(browser, viewport=viewport, color_scheme=scheme)
    problems += check_pages(visitor, server, PUBLIC_PAGES, viewport, scheme)
    problems += [f"console: {e}" for e in visitor.console_errors]
    visitor.context.close()
    assert problems == [], "\n".join(problems)


def test_a_failed_experiment_item_says_why(browser, server):
    from playwright.sync_api import expect

    page = signed_in(browser, server, viewport=DESKTOP)
    page.goto(f"{server}/evals/experiments/exp_shell_cand/")
    expect(page.locator(".item-error").first).to_contain_text("step code")
    expect(page.locator('#sidebar a[aria-current="page"]')).to_have_text("Experiments")
    page.context.close()
