"""A tester's daily work in the playground, in real Chromium against daphne and both loopback
fakes (Anthropic and OpenAI wire formats). Few page sessions, several checks each.

Run separately: ``.venv/bin/pytest -m browser tests/browser/test_playground_daily_browser.py``.
"""

from __future__ import annotations

import time

import pytest

from tests.browser.support import serve_app, sign_in, signed_in_page
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.openai_api import FakeOpenAI

pytestmark = pytest.mark.browser

SETUP = """
import django; django.setup()
from django.contrib.auth import get_user_model
from decimal import Decimal
from runs.models import Workspace
from runs.actions.workspaces import add_member
from playground.models import ProviderConfig, ModelEntry
ws = Workspace.objects.create(slug="acme", name="Acme")
user = get_user_model().objects.create_user(username="tess", password="tess-password-123")
add_member(ws, user, "owner")
add_member(ws, get_user_model().objects.create_user(username="rita", password="rita-password-123"), "owner")
a = ProviderConfig(workspace=ws, name="Fake Anthropic", kind="anthropic", base_url={anthropic!r}, max_retries=0)
a.set_api_key("test-anthropic-key"); a.save()
o = ProviderConfig(workspace=ws, name="Fake OpenAI", kind="openai", base_url={openai!r} + "/v1", max_retries=0)
o.set_api_key("test-openai-key"); o.save()
ModelEntry.objects.create(workspace=ws, provider=a, model_id="claude-sonnet-4-6", display_name="Fake Sonnet",
    context_window=200000, supports_thinking=True, supports_citations=True, supports_pdf=True, is_default=True,
    input_price=Decimal("3"), output_price=Decimal("15"), cache_read_price=Decimal("0.3"), cache_write_price=Decimal("3.75"))
ModelEntry.objects.create(workspace=ws, provider=o, model_id="gpt-fake", display_name="Fake GPT",
    context_window=128000, position=1, max_tokens_param="max_completion_tokens",
    input_price=Decimal("1"), output_price=Decimal("2"), cache_read_price=Decimal("0.1"))
"""


@pytest.fixture(scope="module")
def fakes():
    with FakeAnthropic() as anthropic, FakeOpenAI() as openai:
        yield anthropic, openai


@pytest.fixture(scope="module")
def server(tmp_path_factory, fakes):
    tmp = tmp_path_factory.mktemp("pg-daily")
    anthropic, openai = fakes
    with serve_app(
        tmp,
        setup_code=SETUP.format(anthropic=anthropic.url, openai=openai.url),
        # the fakes listen on loopback: the operator allows it for the workspace providers
        extra_env={"WORKBENCH_EGRESS_ALLOW": "127.0.0.0/8"},
    ) as url:
        yield url


@pytest.fixture
def page(server):
    with signed_in_page(server, "tess") as pg:
        yield pg


def _last_assistant_status(page, status: str, count: int | None = None, timeout: int = 20000) -> None:
    page.wait_for_function(
        """([s, n]) => { const all = document.querySelectorAll('.pg-msg-assistant');
                    return all.length && (n === null || all.length === n) && all[all.length - 1].dataset.status === s; }""",
        arg=[status, count],
        timeout=timeout,
    )


def _send(page, status: str | None = "completed") -> None:
    """Click Send and (unless ``status`` is None) wait for the new answer to reach ``status``."""
    before = page.locator(".pg-msg-assistant").count()
    page.click("#send")
    page.wait_for_function(
        "(n) => document.querySelectorAll('.pg-msg-assistant').length > n", arg=before, timeout=10000
    )
    if status is not None:
        _last_assistant_status(page, status, before + 1)


def _model(page, label: str) -> None:
    value = page.eval_on_selector(
        "#model", "(sel, label) => [...sel.options].find(o => o.textContent.includes(label)).value", label
    )
    page.select_option("#model", value)


def test_sampling_settings_stop_retry_keep_prompt_and_file_toggle(page, server, fakes, tmp_path):
    anthropic, openai = fakes
    page.goto(f"{server}/playground/")
    # Item 7: no file, no "Send file"; a file chosen after unticking is sent again.
    assert not page.is_visible("#send-file-row")
    first = tmp_path / "a.txt"
    first.write_text("First contract. Payment in 30 days.")
    second = tmp_path / "b.txt"
    second.write_text("Second contract. Payment in 60 days.")
    page.set_input_files("#file", str(first))
    page.wait_for_selector("#send-file-row", state="visible")
    page.uncheck("#send-file")
    page.set_input_files("#file", str(second))
    page.wait_for_function("() => document.getElementById('file-name').textContent === 'b.txt'")
    assert page.is_checked("#send-file")
    page.wait_for_function(
        "() => document.getElementById('request-preview').textContent.includes('Second contract')"
    )
    page.click("#file-remove")
    page.wait_for_selector("#send-file-row", state="hidden")

    # Item 1: temperature, top P and top K through the real anthropic SDK, then OpenAI.
    page.click("#advanced summary")
    for box in ("#temperature-enabled", "#top-p-enabled", "#top-k-enabled"):
        page.check(box)
    page.wait_for_function("() => document.getElementById('request-preview').textContent.includes('top_k')")
    page.fill("#prompt", "Sampling check")
    _send(page)
    sent = anthropic.requests[-1]
    assert sent["temperature"] == 1.0 and sent["top_p"] == 1.0 and sent["top_k"] == 40
    # Item 3: the prompt is cleared only once the answer arrived.
    assert page.input_value("#prompt") == ""

    _model(page, "Fake GPT")
    page.fill("#prompt", "Sampling check on OpenAI")
    _send(page)
    sent = openai.requests[-1]
    assert sent["temperature"] == 1.0 and sent["top_p"] == 1.0 and "top_k" not in sent

    # Item 3: a failed call keeps the prompt; Retry sends the same request and succeeds.
    _model(page, "Fake Sonnet")
    page.fill("#prompt", "Please answer [[error:529]]")
    _send(page, "failed")
    assert page.input_value("#prompt") == "Please answer [[error:529]]"
    assert "OVERLOADED" in page.locator(".pg-msg-assistant").last.text_content()
    anthropic.script({"text": "Recovered answer"})
    page.click(".pg-msg-assistant[data-status=failed] button[data-action=retry]")
    _last_assistant_status(page, "completed")
    assert "Recovered answer" in page.text_content("#conversation")
    assert page.input_value("#prompt") == ""

    # Item 2: Stop cancels the provider call and records a cancelled execution.
    anthropic.chunk_delay = 0.1
    try:
        page.fill("#prompt", "Long answer " + " ".join(f"w{i}" for i in range(120)))
        _send(page, None)
        page.wait_for_selector("#stop", state="visible")
        page.wait_for_function(
            """() => { const all = document.querySelectorAll('.pg-msg-assistant [data-stream=text]');
                       return all.length && all[all.length - 1].textContent.length > 10; }""",
            timeout=20000,
        )
        page.click("#stop")
        _last_assistant_status(page, "cancelled")
    finally:
        anthropic.chunk_delay = 0.0
    last = page.locator(".pg-msg-assistant").last
    assert "Stopped" in last.text_content() and "CANCELLED" in last.text_content()
    page.wait_for_selector("#stop", state="hidden")
    assert page.is_enabled("#send")
    assert page.input_value("#prompt").startswith("Long answer")
    run_href = last.locator(".pg-meta a").first.get_attribute("href")
    # the run ends when the worker has seen the Stop: under load that can trail the execution's
    # own status by a moment, so read the run page until it says so (30 s at most)
    deadline = time.monotonic() + 30
    page.goto(server + run_href)
    while "cancelled" not in page.text_content("main").lower() and time.monotonic() < deadline:
        page.wait_for_timeout(500)
        page.reload()
    assert "cancelled" in page.text_content("main").lower()
    assert not [e for e in page.console_errors if "Content Security Policy" in e or "Refused" in e]


def test_compare_columns_and_choose_the_answer_that_joins_the_history(page, server, fakes):
    anthropic, openai = fakes
    page.goto(f"{server}/playground/")
    page.fill("#system-prompt", "Be brief.")
    page.click("#compare-add")
    page.click("#compare-add")
    page.fill("[aria-label='Column B system prompt']", "Be thorough.")
    page.fill("[aria-label='Column B temperature']", "0.2")
    col_c = page.locator("[data-column]").nth(1)
    gpt = page.eval_on_selector(
        "#model", "sel => [...sel.options].find(o => o.textContent.includes('Fake GPT')).value"
    )
    col_c.locator("[data-col=model]").select_option(gpt)
    page.fill("[aria-label='Column C prompt']", "Another question")
    page.fill("#prompt", "Main question")
    page.click("#send")
    page.wait_for_function(
        """() => { const row = document.querySelector('.pg-compare');
                   return row && [...row.querySelectorAll('.pg-msg-assistant')].every(m => m.dataset.status === 'completed')
                     && row.querySelectorAll('[data-choose]').length === 2; }""",
        timeout=30000,
    )
    cols = page.locator(".pg-compare .pg-msg-assistant")
    assert cols.count() == 3
    assert "A · Fake Sonnet" in cols.nth(0).text_content()
    assert "joins the history" in cols.nth(0).text_content()
    assert "Echo: Another question" in cols.nth(2).text_content()
    assert anthropic.requests[-1]["system"] in ("Be brief.", "Be thorough.")
    assert {r.get("temperature") for r in anthropic.requests[-2:]} == {None, 0.2}
    assert openai.requests[-1]["messages"][-1]["content"] == "Another question"
    # Choose column C: its exchange becomes the history the next message carries.
    cols.nth(2).locator("[data-choose]").click()
    page.wait_for_function(
        "() => document.querySelectorAll('.pg-compare [data-joined]').length === 1"
        " && document.querySelectorAll('.pg-compare .pg-msg-assistant')[2].querySelector('[data-joined]')"
    )
    page.wait_for_function(
        "() => document.getElementById('request-preview').textContent.includes('Echo: Another question')"
    )
    assert "Main question" not in page.text_content("#request-preview")
    assert page.input_value("#model") == gpt


def test_cache_guidance_totals_conversation_links_metadata_and_structured_views(
    page, server, fakes, tmp_path
):
    anthropic, _ = fakes
    page.goto(f"{server}/playground/")
    assert page.get_attribute("#temperature", "type") == "range"
    assert page.get_attribute("#top-p", "type") == "range"
    # Item 6: below the minimum cacheable size, a warning beside the toggle.
    page.fill("#system-prompt", "Short.")
    page.check("#create-cache")
    page.wait_for_selector("#cache-hint", state="visible")
    assert "1,024 tokens" in page.text_content("#cache-hint")
    page.fill("#system-prompt", "You are a contracts lawyer. " * 200)
    page.wait_for_selector("#cache-hint", state="hidden")
    contract = tmp_path / "zebra.txt"
    contract.write_text("The zebra clause: payment within 30 days.")
    page.set_input_files("#file", str(contract))
    page.wait_for_selector("#send-file-row", state="visible")
    page.fill("#prompt", "Explain the okapi clause")
    _send(page)
    first = page.locator(".pg-msg-assistant").last
    assert "Cache written" in first.text_content()
    assert first.locator(".pg-msg-head time").count() == 1  # Item 8: time on assistant messages
    page.wait_for_selector("#cache-status", state="visible")
    assert "left" in page.text_content("#cache-status")
    assert "Session: 1 call" in page.text_content("#session-totals")
    page.fill("#prompt", "And the narwhal clause?")
    _send(page)
    second = page.locator(".pg-msg-assistant").last
    assert "Cache hit" in second.text_content()
    assert "read" in page.text_content("#cache-status")
    assert "Session: 2 calls" in page.text_content("#session-totals")
    user_tokens = page.locator(".pg-msg-user [data-user-tokens]").last.text_content()
    assert user_tokens.startswith("Input: ") and "(0 cached)" not in user_tokens  # Item 8

    # Item 5: the conversation's runs are linked, titled by their prompt, and searchable.
    conversation = second.locator("a[data-conversation]").get_attribute("href")
    run2 = second.locator(".pg-meta a").first.get_attribute("href").strip("/").split("/")[-1]
    # Item 12 and 9 reuse this page below; first the structured output views (item 8).
    _choose_operation(page, "validation")
    page.fill("#prompt", "Is it compliant?")
    _send(page)
    box = page.locator(".pg-msg-assistant").last.locator(".pg-structured")
    box.locator("button[data-view=xml]").click()
    assert box.locator("[data-view-pane=xml]").is_visible()
    assert "<validation>" in box.locator("[data-view-pane=xml]").text_content()
    box.locator("button[data-view=json]").click()
    assert box.locator("[data-view-pane=json] .tok-key").count() >= 2
    assert not box.locator(".pg-formatted").is_visible()

    page.goto(server + conversation)
    titles = page.text_content("main")
    assert (
        "Playground · Explain the okapi clause" in titles and "Playground · And the narwhal clause?" in titles
    )
    page.goto(f"{server}/runs/?q=narwhal")
    assert page.locator(f"main a[href*='{run2}']").count() >= 1

    # Item 8: a restored conversation shows its documents; tool input is JSON.
    page.goto(f"{server}/playground/?from_event={run2}:2")
    page.wait_for_selector("#origin:not([hidden])")
    assert "zebra.txt" in page.locator("[data-restored] [data-documents]").first.text_content()
    page.click("#clear")
    _choose_operation(page, "generic")
    page.check("#tool-use")
    page.fill("#prompt", "Use get_weather for Paris")
    _send(page)
    tool_input = page.locator(".pg-msg-assistant").last.locator("[data-json]").text_content()
    assert '"city": "city example"' in tool_input
    assert not [e for e in page.console_errors if "Content Security Policy" in e or "Refused" in e]


def _choose_operation(page, op: str) -> None:
    """Seed-004 item 26: the operation type is chosen in a sheet, not a <select>."""
    page.click("#operation-open")
    page.check(f'#operation-sheet input[value="{op}"]')
    page.click("#operation-close")


def _level(page, name: str) -> tuple[str, str]:
    row = page.locator(f"#levels-table tr[data-level='{name}'] td")
    return row.nth(0).text_content(), row.nth(1).text_content()


def test_remembered_model_and_configuration_levels(page, server, fakes):
    page.context.clear_cookies()  # rita: a user who has not sent anything yet
    sign_in(page, server, "rita")
    page.goto(f"{server}/playground/")
    page.click("#levels summary")
    assert _level(page, "Model") == ("Fake Sonnet", "workspace default")
    assert _level(page, "Timeout and retries")[1].startswith("workspace")
    assert _level(page, "Temperature") == ("not sent", "global default")
    page.click("#advanced summary")
    page.check("#temperature-enabled")
    page.wait_for_function(
        "() => document.querySelector(\"#levels-table tr[data-level='Temperature'] td:last-child\").textContent"
        " === 'this page (session)'"
    )
    page.click(".pg-saved summary")
    page.fill("#save-name", "Careful reviewer")
    page.click("#save-prompt")
    page.wait_for_function("() => document.getElementById('save-status').textContent.startsWith('Saved')")
    page.goto(f"{server}/playground/")
    saved = page.get_attribute(".pg-saved a", "href")
    page.goto(f"{server}/playground/{saved}")
    page.click("#levels summary")
    assert _level(page, "Temperature") == ("sent: 1", "saved prompt “Careful reviewer” version 1")

    # Item 9: the model last sent to is remembered for this user.
    _model(page, "Fake GPT")
    page.wait_for_function(
        "() => document.querySelector(\"#levels-table tr[data-level='Model'] td:last-child\").textContent"
        " === 'this page (session)'"
    )
    page.fill("#prompt", "remember me")
    _send(page)
    page.goto(f"{server}/playground/")
    assert "Fake GPT" in page.eval_on_selector("#model", "s => s.selectedOptions[0].textContent")
    page.click("#levels summary")
    assert _level(page, "Model") == ("Fake GPT", "your last send (remembered for you)")
    assert "key: stored key" in _level(page, "Provider and key")[0]


def test_manage_providers_and_models_and_stateless_answers_cleared(page, server, fakes):
    page.goto(f"{server}/playground/settings/")
    row = page.locator("[data-manage-provider='Fake OpenAI']")
    row.locator("button[value=disable_provider]").click()
    page.wait_for_load_state()
    page.goto(f"{server}/playground/")
    assert "Fake GPT" not in page.text_content("#model")
    page.goto(f"{server}/playground/settings/")
    page.locator("[data-manage-provider='Fake OpenAI'] button[value=enable_provider]").click()
    page.wait_for_load_state()
    model_row = page.locator("[data-manage-model='Fake GPT']")
    model_row.locator("summary").click()
    model_row.locator("input[name=display_name]").fill("Fake GPT renamed")
    model_row.locator("button", has_text="Save model").click()
    page.wait_for_load_state()
    page.goto(f"{server}/playground/")
    assert "Fake GPT renamed" in page.text_content("#model")

    # Stateless answers do not survive a switch to stateful (they are in no history).
    page.click("[data-mode=stateless]")
    page.wait_for_function(
        "() => document.querySelector('[data-mode=stateless]').getAttribute('aria-pressed') === 'true'"
    )
    _model(page, "Fake Sonnet")
    page.fill("#prompt", "standalone question")
    _send(page)
    assert page.locator("#conversation .pg-msg").count() == 2
    page.click("[data-mode=stateful]")
    page.wait_for_function("() => document.querySelectorAll('#conversation .pg-msg').length === 0")
