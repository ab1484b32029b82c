"""The TypeScript recipes of docs/engineers/typescript.md decided in Chromium, run as written by
``sdk/typescript/test/run_recipe.js``:

- the Next.js route (the Vercel AI SDK's ``generateText`` and ``streamText`` through
  ``workbenchMiddleware``, against the loopback OpenAI fake) waits at its gate until a reviewer
  approves it in the inbox; then the answer streams, and the run page shows the completed run
  with its priced model calls;
- the LangGraph.js graph (draft -> review with ``interrupt()`` -> publish, back to draft on a
  rejection) is rejected with a note in the inbox, revises, is approved and publishes; the run
  page shows draft's two attempts and both decisions, as the Python LangGraph test does."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path

import pytest

from tests.browser.support import serve_app, signed_in_page
from tests.browser.test_langgraph_review_browser import SETUP, decide_in_inbox
from tests.fakes.openai_api import FakeOpenAI
from tests.live.test_typescript_sdk import NODE, NPM, SDK, npm_ci

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("typescript-browser")
    with serve_app(tmp, setup_code=SETUP) as base:
        yield base, (Path(tmp) / "token.txt").read_text().strip()


def assert_priced_calls(page, calls: int) -> None:
    """The run page's ledger totals: ``calls`` model calls, tokens, and a cost above zero (its
    exact amount in the title), not "cost unknown"."""
    totals = page.locator("#ledger-totals")
    text = totals.inner_text()
    assert f"{calls} model calls" in text, text
    assert "unknown" not in text and " 0 tokens" not in text, text
    exact = totals.locator("span[title]").get_attribute("title") or ""
    amount = re.fullmatch(r"USD (\d+(?:\.\d+)?)", exact)
    assert amount and Decimal(amount.group(1)) > 0, (exact, text)


@contextmanager
def recipe(env: dict, *args: str) -> Iterator[subprocess.Popen]:
    """``run_recipe.js <args>`` running beside the test (killed if still running at the end)."""
    proc = subprocess.Popen(
        [str(NODE), "test/run_recipe.js", *args],
        cwd=SDK,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def answer_of(proc: subprocess.Popen) -> dict:
    """The recipe's last line (its JSON answer), once it ended well."""
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.skipif(NODE is None or NPM is None, reason="node and npm are not installed")
def test_the_ai_sdk_route_waits_for_an_approval_given_in_the_inbox(server):
    from playwright.sync_api import expect

    npm_ci()
    base, token = server
    with FakeOpenAI() as fake:
        env = {
            **os.environ,
            "WORKBENCH_URL": base,
            "WORKBENCH_TOKEN": token,
            "OPENAI_BASE_URL": fake.url + "/v1",
            "OPENAI_API_KEY": "test-openai-key",
        }
        with recipe(env, "nextjs-route", "a greeting") as route, signed_in_page(base, "rita") as page:
            decide_in_inbox(page, base, "chat: a greeting", "approved", "go ahead")
            answer = answer_of(route)
            assert answer["status"] == 200 and answer["text"].startswith("Echo: Write it: ")
            page.goto(f"{base}/runs/{answer['runId']}/")
            expect(page.locator("#run-status")).to_contain_text("completed")
            history = page.locator("#gate-panel .history").inner_text()
            assert "approved" in history and "go ahead" in history
            assert_priced_calls(page, calls=2)  # generateText's outline, streamText's answer
            assert page.console_errors == []  # type: ignore[attr-defined]


@pytest.mark.skipif(NODE is None or NPM is None, reason="node and npm are not installed")
def test_the_langgraph_js_recipe_is_rejected_then_approved_in_the_inbox(server):
    from playwright.sync_api import expect

    npm_ci()
    base, token = server
    env = {**os.environ, "WORKBENCH_URL": base, "WORKBENCH_TOKEN": token}
    with recipe(env, "langgraph", "tides") as graph, signed_in_page(base, "rita") as page:
        decide_in_inbox(page, base, "articles", "rejected", "cite your sources")
        decide_in_inbox(page, base, "articles", "approved", "good now")
        answer = answer_of(graph)
        assert answer["state"]["published"] is True
        assert answer["state"]["text"] == "A piece on tides (cite your sources)"
        page.goto(f"{base}/runs/{answer['runId']}/")
        expect(page.locator("#run-status")).to_contain_text("completed")
        timeline = page.locator("#timeline").inner_text()
        assert "step draft started · attempt 1" in timeline and "step draft started · attempt 2" in timeline
        assert "step review started · attempt 2" in timeline
        assert "step publish completed" in timeline
        history = page.locator("#gate-panel .history").inner_text()
        assert "rejected" in history and "cite your sources" in history
        assert "approved" in history and "good now" in history
        nodes = " | ".join(page.locator("svg a.node text.sub").all_text_contents())
        assert "completed · attempt 2" in nodes  # draft and review in the graph
        assert page.console_errors == []  # type: ignore[attr-defined]
