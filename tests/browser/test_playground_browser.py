"""The playground in real Chromium against a daphne server and the loopback Anthropic fake.

Run separately: ``.venv/bin/pytest tests/browser/test_playground_browser.py -m browser``.
Compose with a file and thinking on, send, watch the answer stream in, export the conversation,
switch mode, then open the recorded model call from its run in the playground.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.browser.support import serve_app, signed_in_page
from tests.fakes.anthropic_api import FakeAnthropic

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
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
p = ProviderConfig(workspace=ws, name="Fake Anthropic", kind="anthropic", base_url={url!r}, max_retries=0)
p.set_api_key("test-anthropic-key"); p.save()
ModelEntry.objects.create(workspace=ws, provider=p, model_id="claude-sonnet-4-6", display_name="Fake Sonnet",
    context_window=200000, supports_thinking=True, supports_citations=True, supports_pdf=True, is_default=True,
    input_price=Decimal("3"), output_price=Decimal("15"), cache_read_price=Decimal("0.3"), cache_write_price=Decimal("3.75"))
"""


@pytest.fixture(scope="module")
def fake():
    with FakeAnthropic() as server:
        yield server


@pytest.fixture(scope="module")
def server(tmp_path_factory, fake):
    tmp = tmp_path_factory.mktemp("pg-browser")
    with serve_app(
        tmp,
        setup_code=SETUP.format(url=fake.url),
        extra_env={
            # the fake provider listens on loopback: the operator allowance the server needs for it
            "PLAYGROUND_EGRESS_ALLOW": "127.0.0.0/8",
        },
    ) as url:
        yield url


@pytest.fixture
def page(server):
    with signed_in_page(server, "tess", accept_downloads=True) as pg:
        yield pg


def test_compose_send_stream_export_switch_mode_and_open_from_run(page, server, tmp_path, fake):
    contract = tmp_path / "contract.txt"
    contract.write_text("Payment is due within 30 days of invoice. Liability is capped at fees paid.")
    page.goto(f"{server}/playground/")
    assert page.locator("#setup-problem").count() == 0
    page.fill("#system-prompt", "You are a careful legal assistant.")
    page.set_input_files("#file", str(contract))
    page.wait_for_selector("#file-info:not([hidden])")
    assert page.text_content("#file-name") == "contract.txt"
    page.check("#thinking")
    # smart behaviour applied server-side: max tokens raised for the thinking budget
    page.wait_for_function("() => document.getElementById('max-tokens').value === '16000'")
    page.check("#create-cache")
    page.fill("#prompt", "What are the payment terms? [[slow]]")
    page.wait_for_function(
        "() => document.getElementById('request-preview').textContent.includes('budget_tokens')"
    )
    preview = json.loads(page.text_content("#request-preview"))
    assert preview["thinking"] == {"type": "enabled", "budget_tokens": 10000}
    assert preview["messages"][-1]["content"][0]["type"] == "document"

    # streaming: thinking arrives while the execution is still processing. The fake holds its stream
    # after the first thinking delta until the page has shown it, so no timing decides this test.
    fake.gate.clear()
    try:
        page.click("#send")
        page.wait_for_function(
            """() => { const m = document.querySelector('.pg-msg-assistant');
                       if (!m) return false;
                       const t = m.querySelector('[data-stream=thinking]');
                       return m.dataset.status === 'processing' && t && t.textContent.length > 0; }""",
            timeout=60000,  # the execution waits for the worker, which a loaded machine starts late
        )
        partial = page.eval_on_selector(".pg-msg-assistant [data-stream]", "e => e.textContent")
    finally:
        fake.gate.set()
    page.wait_for_selector(".pg-msg-assistant[data-status=completed]", timeout=30000)
    answer = page.text_content(".pg-msg-assistant")
    assert "Echo: What are the payment terms?" in answer
    assert partial and len(partial) < len(answer)
    assert "Cache write" in answer and "Thinking" in answer
    user_flags = page.text_content(".pg-msg-user .pg-flags")
    assert "Thinking: ✓" in user_flags and "Cache: ✓" in user_flags and "File: ✓" in user_flags
    # create cache turned itself off after the send; the context meter shows the window
    page.wait_for_function("() => !document.getElementById('create-cache').checked")
    assert "/200,000" in page.text_content("#context")
    run_href = page.get_attribute(".pg-msg-assistant .pg-meta a", "href")
    run_id = run_href.strip("/").split("/")[-1]

    with page.expect_download() as info:
        page.click("#export")
    exported = json.loads(Path(info.value.path()).read_text())
    assert exported["mode"] == "stateful"
    first_user = exported["history"][0]["content"]
    assert first_user[0]["type"] == "document" and first_user[0]["cache_control"] == {"type": "ephemeral"}
    assert exported["history"][1]["content"][0]["type"] == "thinking"
    assert any(
        m["role"] == "assistant" and m["usage"]["cache_write_tokens"] > 0 for m in exported["messages"]
    )

    page.click("[data-mode=stateless]")
    page.wait_for_function(
        "() => document.querySelector('[data-mode=stateless]').getAttribute('aria-pressed') === 'true'"
    )
    assert page.locator("#conversation > li").count() == 0
    page.wait_for_function(
        "() => !document.getElementById('request-preview').textContent.includes('\"assistant\"')"
    )

    # open the recorded model call (the request event, seq 2) of that run in the playground
    page.goto(f"{server}/playground/?from_event={run_id}:2")
    page.wait_for_selector("#origin:not([hidden])")
    assert "Echo: What are the payment terms?" in page.text_content("#origin-response")
    assert page.input_value("#prompt") == "What are the payment terms? [[slow]]"
    assert page.is_checked("#thinking") and page.is_checked("#create-cache")
    assert page.text_content("#file-name") == "contract.txt"
    assert page.input_value("#system-prompt") == "You are a careful legal assistant."
    page.wait_for_function(
        "() => document.getElementById('request-preview').textContent.includes('cache_control')"
    )
    restored = json.loads(page.text_content("#request-preview"))
    recorded = [r for r in fake.requests if r.get("thinking")][0]
    recorded = {k: v for k, v in recorded.items() if k != "stream"}
    assert restored == recorded
    assert not [e for e in page.console_errors if "Content Security Policy" in e or "Refused" in e]
