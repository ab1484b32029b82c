"""Prompts as versioned releases, end to end in Chromium (issue 32's acceptance), plus seed-004
items 8 and 26 in the playground; axe-core light and dark, and 390 px.

A tester saves version 2 from the playground (and a send of it records version 2); an owner
protects ``production``; the tester asks to promote version 2 with an experiment whose change is
"prompt support/greeting version 2"; the navigation counts the request; a reviewer sees the diff and
the experiment's result (the version it tested, its regressed items, the cost change) in the inbox
and approves with the keyboard; the label moves; a pipeline using the SDK's ``wb.prompt(...)`` gets
version 2 once its cache entry is older than the TTL, and its run records ``prompt@2`` (the runs list
filters by it). Seed-004 items 8, 26 and 31 are checked with axe at 1280 px (light and dark) and at
390 px (the toggle, the operation sheet, the levels table, the settings page).

Run separately: ``.venv/bin/python -m pytest tests/browser/test_prompt_release_browser.py -m browser``.
"""

from __future__ import annotations

import pytest

from tests.browser import support
from tests.fakes.anthropic_api import FakeAnthropic

pytestmark = pytest.mark.browser

NAME = "support/greeting"
EXPERIMENT = "exp_00000000-0000-4000-8000-0000000000b2"
SETUP = """
import django; django.setup()
from django.contrib.auth import get_user_model
from accounts.tokens import create_token
from runs.models import Workspace
from runs.actions.permissions import ROLE_SCOPES
from runs.actions.prompts import do_move_label, do_save_prompt_version
from runs.actions.workspaces import add_member
from playground.models import ProviderConfig, ModelEntry
ws = Workspace.objects.create(slug="acme", name="Acme")
users = dict()
for name, role in (("tess", "reviewer"), ("olga", "owner"), ("rene", "reviewer")):
    users[name] = get_user_model().objects.create_user(username=name, password=f"{{name}}-password-123")
    add_member(ws, users[name], role)
p = ProviderConfig(workspace=ws, name="Fake Anthropic", kind="anthropic", base_url={url!r}, max_retries=0)
p.set_api_key("test-anthropic-key"); p.save()
ModelEntry.objects.create(workspace=ws, provider=p, model_id="claude-sonnet-4-6", display_name="Fake Sonnet",
    context_window=200000, is_default=True)
owner = ROLE_SCOPES["owner"]
do_save_prompt_version(ws, name={name!r}, body="Hello {{{{customer}}}}, thanks for writing.", scopes=owner,
    user=users["olga"], message="first")
do_move_label(ws, name={name!r}, label="production", version=1, scopes=owner, user=users["olga"])
# The experiment the tester attaches: "prompt support/greeting version 2" over a dataset, against a
# replay baseline (its forks ran in tests/evals/test_prompt_experiment.py's way; rows written here).
from decimal import Decimal
from django.utils import timezone
from evals import actions as evals_actions
from evals.actions.experiments import summarize
from evals.models import Experiment, ExperimentItem
ds = evals_actions.do_create_dataset(workspace=ws, name="Greetings", description="decided greetings")
evals_actions.do_add_items(dataset=ds, items=[
    {{"id": f"ticket-{{i}}", "input": {{"customer": f"C{{i}}"}}, "expected": {{"text": f"hello {{i}}"}}}} for i in range(3)
])
def experiment(pid, name, scores, change, baseline=None):
    e = Experiment.objects.create(public_id=pid, workspace=ws, dataset=ds, as_of_revision=1, name=name,
        change=change, evaluator={{"kind": "exact"}}, baseline=baseline, status="completed",
        created_at=timezone.now(), finished_at=timezone.now())
    for i, score in enumerate(scores):
        ExperimentItem.objects.create(experiment=e, item_key=f"ticket-{{i}}", status="completed", score=score,
            output='{{"text":"x"}}', cost=Decimal("0.012"), source_cost=Decimal("0.010"), provider_calls=1)
    e.summary = summarize(e)
    e.save()
    return e
base = experiment("exp_00000000-0000-4000-8000-0000000000a1", "replay", [1, 1, 1], {{}})
experiment({experiment!r}, "greeting v2", [1, 0, 0.5], {{"prompt": {{"name": {name!r}, "version": 2}}}}, base)
open({token_file!r}, "w").write(create_token(workspace=ws, name="pipeline", scopes=["read", "write"]).secret)
"""


@pytest.fixture(scope="module")
def fake():
    with FakeAnthropic() as server:
        yield server


@pytest.fixture(scope="module")
def env(tmp_path_factory, fake):
    tmp = tmp_path_factory.mktemp("prompt-release")
    token_file = tmp / "token.txt"
    setup = SETUP.format(url=fake.url, name=NAME, token_file=str(token_file), experiment=EXPERIMENT)
    with support.serve_app(
        tmp,
        setup_code=setup,
        extra_env={"PLAYGROUND_EGRESS_ALLOW": "127.0.0.0/8"},
    ) as url:
        yield url, token_file.read_text().strip()


def axe_serious(page, where: str) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    out = []
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for v in Axe().run(page).response["violations"]:
            if v["impact"] in ("serious", "critical"):
                out.append(
                    f"{where} {scheme}: {v['id']} ({v['impact']}) {[n['target'] for n in v['nodes'][:3]]}"
                )
    page.emulate_media(color_scheme="light")
    return out


def _as(browser, server: str, user: str, **options):
    page = support.new_page(browser, **options)
    support.sign_in(page, server, user)
    return page


def test_save_protect_promote_approve_and_fetch(env):
    from playwright.sync_api import sync_playwright
    from workbench_sdk.client import WorkbenchClient
    from workbench_sdk.prompt_context import active_prompt
    from workbench_sdk.prompts import PromptCache
    from workbench_sdk.traced import ClientSink, Tracer

    server, token = env
    client = WorkbenchClient(server, token, retries=0)
    now = [0.0]
    cache = PromptCache(client, ttl=60.0, background=False, clock=lambda: now[0])
    assert cache.get(NAME, label="production").version == 1  # the pipeline runs version 1

    violations: list[str] = []
    with sync_playwright() as pw:
        browser = support.launch(pw)
        try:
            # A tester opens version 1 in the playground, edits it, saves version 2.
            tess = _as(browser, server, "tess", viewport={"width": 1280, "height": 900})
            tess.goto(f"{server}/playground/?prompt_name={NAME}&version=1")
            assert tess.input_value("#prompt").startswith("Hello {{customer}}")
            # seed-004 item 8: no system prompt, no "Send system prompt" toggle
            assert not tess.locator("#send-system-prompt-row").is_visible()
            # seed-004 item 26: the operation type from a sheet with descriptions and badges
            assert tess.locator("select#operation-type").count() == 0
            tess.click("#operation-open")
            sheet = tess.locator("#operation-sheet")
            assert sheet.is_visible() and sheet.locator(".pg-badge-structured").count() >= 1
            assert "(structured)" not in sheet.inner_text()
            violations += axe_serious(tess, "operation sheet")
            tess.check('#operation-sheet input[value="generic"]')
            tess.click("#operation-close")
            assert not sheet.is_visible() and tess.inner_text("#operation-current") == "Generic"
            tess.fill("#prompt", "Hi {{customer}}, thank you for your message.")
            tess.fill("#save-name", NAME)
            tess.click("#save-prompt")
            tess.wait_for_function(
                "() => document.getElementById('save-status').textContent.includes('version 2')"
            )
            violations += axe_serious(tess, "playground")
            # A send of the saved text records version 2 on its model call.
            tess.click("#send")
            tess.wait_for_function(
                "() => [...document.querySelectorAll('.pg-msg-assistant')].some(m => m.dataset.status === 'completed')",
                timeout=20000,
            )
            assert "Prompt: support/greeting version 2" in tess.inner_text("#conversation")

            # An owner protects production.
            olga = _as(browser, server, "olga")
            olga.goto(f"{server}/prompts/")
            olga.fill("#protect-label", "production")
            olga.click("button[value=protect]")
            olga.wait_for_selector("text=production is now protected.")
            violations += axe_serious(olga, "prompts")

            # The prompt page's "Test" opens the form that starts an experiment of a version (owners).
            olga.goto(f"{server}/prompts/{NAME}/")
            olga.click("a[aria-label='Test version 2 on a dataset']")
            olga.wait_for_selector("h1:has-text('Test support/greeting@2 on a dataset')")
            assert olga.locator("#exp-dataset option").count() == 1
            violations += axe_serious(olga, "new prompt experiment")

            # The tester asks to promote version 2 (production is protected: a request).
            tess.goto(f"{server}/prompts/{NAME}/")
            tess.fill("#move-label", "production")
            tess.select_option("#move-version", "2")
            tess.fill("#move-note", "friendlier greeting")
            tess.fill("#move-experiment", EXPERIMENT)
            tess.click("#move-heading ~ form button[type=submit]")
            tess.wait_for_selector("text=waits for a reviewer in the inbox")
            assert cache.get(NAME, label="production").version == 1
            violations += axe_serious(tess, "prompt detail")

            # A reviewer sees the diff in the inbox and approves with the keyboard.
            rene = _as(browser, server, "rene")
            rene.goto(f"{server}/runs/inbox/")
            badge = rene.locator("nav .nav-count-promotions")  # the navigation counts what waits
            assert badge.inner_text().startswith("1") and "prompt promotion pending" in badge.inner_text()
            item = rene.locator(".promotion").first
            assert "support/greeting" in item.inner_text() and "friendlier greeting" in item.inner_text()
            assert (
                item.locator(".prompt-diff li.add").count() >= 1
                and item.locator(".prompt-diff li.del").count() >= 1
            )
            # ... and the experiment's result: the version it tested, its regressions, the cost change.
            result = item.locator(".experiment-summary")
            result.wait_for()
            text = result.inner_text()
            assert "Change: prompt support/greeting version 2" in text and "did not test" not in text
            assert "2 regressions" in text and "Cost change" in text
            assert result.locator("table.experiment-regressions tbody tr").count() == 2
            violations += axe_serious(rene, "inbox")
            item.locator("input[name=note]").focus()
            rene.keyboard.type("looks good")
            rene.keyboard.press("Tab")  # to Approve
            assert rene.evaluate("() => document.activeElement.value") == "approved"
            rene.keyboard.press("Enter")
            rene.wait_for_selector("text=production moved to version 2")
            assert rene.locator("nav .nav-count-promotions").count() == 0

            # Within the TTL the pipeline still has version 1; past it, version 2.
            now[0] += 30
            assert cache.get(NAME, label="production").version == 1
            now[0] += 31
            prompt = cache.get(NAME, label="production")
            assert prompt.version == 2

            # The pipeline's model call records prompt@2; the runs list filters by it.
            client.start_run(
                workflow={"id": "support-bot", "version": 1, "steps": [{"id": "reply"}], "edges": []},
                run_id="run_reply",
            )
            token_ctx = active_prompt.set(None)
            try:
                text = prompt.compile(customer="Ann")
                assert text == "Hi Ann, thank you for your message."
                call = Tracer(ClientSink(client, "run_reply"), prices={}).begin(
                    "anthropic",
                    "claude-sonnet-4-6",
                    {"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": text}]},
                )
                call.finish({"id": "msg", "model": "claude-sonnet-4-6", "content": []}, usage=None)
            finally:
                active_prompt.reset(token_ctx)
            rene.goto(f"{server}/runs/?prompt={NAME}@2")
            assert rene.locator("main a[href*='run_reply']").count() >= 1
            rene.goto(f"{server}/runs/?prompt={NAME}@1")
            assert rene.locator("main a[href*='run_reply']").count() == 0
            rene.goto(f"{server}/prompts/{NAME}/?runs=2")
            assert rene.locator("#runs a[href*='run_reply']").count() == 1
            assert rene.locator("#runs li a").count() == 2  # and the playground's send of version 2
            history = rene.inner_text("#promotions-heading ~ ul")
            assert "approved" in history and "asked by tess" in history and "decided by rene" in history

            # Seed-004 item 31: an owner sets defaults per operation type; choosing the type applies
            # them, and "where settings come from" names the operation type as their level.
            olga.goto(f"{server}/playground/settings/")
            row = olga.locator('tr[data-operation="validation"]')
            row.locator("input[name=temperature]").fill("0.2")
            row.locator("button[type=submit]").click()
            olga.wait_for_load_state()
            assert (
                olga.locator('tr[data-operation="validation"] input[name=temperature]').input_value() == "0.2"
            )
            violations += axe_serious(olga, "playground settings")
            tess.goto(f"{server}/playground/")
            tess.click("#operation-open")
            tess.check('#operation-sheet input[value="validation"]')
            tess.click("#operation-close")
            tess.click("#levels summary")
            violations += axe_serious(tess, "levels")
            temperature = tess.locator('#levels-table tr[data-level="Temperature"]')
            assert "0.2" in temperature.inner_text() and "operation type" in temperature.inner_text()
            assert (
                tess.locator("#levels-table").inner_text().count("operation type “validation” (workspace)")
                == 1
            )

            # 390 px: nothing wider than the screen.
            phone = _as(browser, server, "tess", viewport={"width": 390, "height": 844})
            for path in (
                f"/prompts/{NAME}/",
                "/prompts/",
                "/runs/inbox/",
                "/playground/",
                f"/evals/experiments/new/?prompt={NAME}@2",
            ):
                phone.goto(server + path)
                width = phone.evaluate("document.documentElement.scrollWidth")
                assert width <= 390, (path, width)
                violations += axe_serious(phone, f"390px {path}")
            phone.goto(f"{server}/playground/")
            assert not phone.locator("#send-system-prompt-row").is_visible()  # item 8 at 390 px
            phone.fill("#system-prompt", "You are kind.")  # now the toggle shows
            assert phone.locator("#send-system-prompt-row").is_visible()
            violations += axe_serious(phone, "390px item 8 toggle")
            phone.click("#operation-open")  # item 26 at 390 px: the sheet fits and reads well
            sheet = phone.locator("#operation-sheet")
            assert sheet.is_visible() and sheet.locator(".pg-badge-structured").count() >= 1
            box = sheet.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, box
            violations += axe_serious(phone, "390px item 26 sheet")
            phone.keyboard.press("Escape")
            assert not sheet.is_visible()
            phone.click("#levels summary")  # item 31 at 390 px: where settings come from
            violations += axe_serious(phone, "390px item 31 levels")
            support.shot(phone, "prompt-playground-390")
            owner_phone = _as(browser, server, "olga", viewport={"width": 390, "height": 844})
            owner_phone.goto(f"{server}/playground/settings/")  # item 31: the defaults per operation type
            assert owner_phone.locator('tr[data-operation="validation"]').count() == 1
            width = owner_phone.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, ("/playground/settings/", width)
            violations += axe_serious(owner_phone, "390px item 31 settings")
            errors = [
                *tess.console_errors,
                *olga.console_errors,
                *rene.console_errors,
                *phone.console_errors,
                *owner_phone.console_errors,
            ]
            assert errors == []
        finally:
            browser.close()
    assert violations == [], "\n".join(violations)


def test_the_sdk_falls_back_to_its_cached_version_when_the_server_is_down(env):
    from workbench_sdk.client import WorkbenchClient
    from workbench_sdk.prompts import PromptCache, PromptFallbackWarning

    server, token = env
    now = [0.0]
    cache = PromptCache(
        WorkbenchClient(server, token, retries=0), ttl=60.0, background=False, clock=lambda: now[0]
    )
    fetched = cache.get(NAME, label="latest")
    down = WorkbenchClient("http://127.0.0.1:9", token, retries=0, timeout=2)  # nothing listens there
    cache._client = down  # noqa: SLF001 (the server goes away)
    now[0] += 61
    with pytest.warns(PromptFallbackWarning, match="the server cannot be reached"):
        assert cache.get(NAME, label="latest") == fetched
