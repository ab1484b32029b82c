"""The span detail pane: the error inside a span, a model call's input, output, tokens, cost and
latency, tool calls, attributes as a table, links to the span's events; the tree opened to the
selected span. On the demo batch run (10k+ events, imported as a bundle)."""

from __future__ import annotations

import html
import re

import pytest

from runs.demo.public import import_batch
from runs.models import Event

pytestmark = pytest.mark.django_db


@pytest.fixture
def batch(workspace):
    return import_batch(workspace)


def _start_of(run, span_id: str) -> int:
    needle = f'"spanId":"{span_id}"'
    return Event.objects.filter(run=run, type="span_started", body__contains=needle).values_list(
        "seq", flat=True
    )[0]


def _pane(client, run, seq) -> str:
    response = client.get(f"/runs/{run.run_id}/spans/{seq}/", headers={"HX-Request": "true"})
    assert response.status_code == 200
    return html.unescape(response.content.decode())


def test_the_first_error_shows_the_rate_limit_inside_the_span(client, alice, batch):
    client.force_login(alice)
    page = client.get(f"/runs/{batch.run_id}/").content.decode()
    seq = int(re.search(r'id="jump-first-error" href="[^"]*\?span=(\d+)#trace"', page).group(1))
    assert seq == _start_of(batch, "sp-item-250")
    pane = _pane(client, batch, seq)
    error = re.search(r'<p class="sn-error" role="note"><strong>Error:</strong> ([^<]+)</p>', pane).group(1)
    assert error.startswith("[RATE_LIMITED] 429 rate limited on posting #250")
    # the error event is one of the span's events, linked
    error_seq = Event.objects.filter(run=batch, type="error", seq__gt=seq).values_list("seq", flat=True)[0]
    assert f"#seq-{error_seq}" in pane


def test_a_model_span_shows_input_output_tokens_cost_and_latency(client, alice, batch):
    client.force_login(alice)
    pane = _pane(client, batch, _start_of(batch, "sp-item-1"))
    call = pane[pane.index('class="sn-call"') :]
    assert "claude-haiku-4-5" in call and "anthropic" in call
    # the request as a conversation: the system prompt, then the user's message
    assert re.search(
        r'msg-system"><span class="msg-role">system</span><pre class="msg-text">You score job postings', call
    )
    assert re.search(
        r'msg-user"><span class="msg-role">user</span><pre class="msg-text">Score posting #1: ', call
    )
    assert re.search(
        r'msg-assistant"><span class="msg-role">assistant</span><pre class="msg-text">scored posting #1', call
    )
    tokens = re.search(r"<dt>Tokens</dt><dd>([^<]+)</dd>", call).group(1)
    assert tokens.startswith("1,040 (in 913, out 127, cached 600)")
    assert re.search(r"<dt>Cost</dt><dd><span title=\"USD [0-9.]+\">USD 0\.00", call)
    assert "<dt>Latency</dt><dd><span" in call
    # the tool call inside the span, as a call
    assert 'lookup_company(<span class="tool-args">{\n  "company": "Globex"\n}</span>)' in pane
    # attributes as a table
    assert re.search(r'<th scope="row" class="mono">posting.company</th><td class="mono">Globex</td>', pane)


def test_the_tree_opens_to_the_selected_span(client, alice, batch):
    client.force_login(alice)
    seq = _start_of(batch, "sp-item-1500")
    page = html.unescape(client.get(f"/runs/{batch.run_id}/?span={seq}").content.decode())
    tree = page[page.index('id="span-tree"') : page.index('id="span-detail"')]
    score = _start_of(batch, "sp-score")
    assert re.search(rf'id="span-{score}"[^>]*aria-expanded="true"', tree)
    selected = re.search(rf'id="span-{seq}"[^>]*aria-level="2"[^>]*aria-selected="true"', tree)
    assert selected, "the selected span is shown, selected, under its opened parent"
    assert f'tabindex="0" data-seq="{seq}"' in tree
    assert "score posting #1500" in page[page.index('id="span-detail"') :]


def test_an_outsider_gets_404_for_a_span(client, charlie, batch):
    client.force_login(charlie)
    seq = _start_of(batch, "sp-item-1")
    assert client.get(f"/runs/{batch.run_id}/spans/{seq}/", headers={"HX-Request": "true"}).status_code == 404
