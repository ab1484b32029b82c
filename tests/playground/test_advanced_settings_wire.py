"""Every advanced setting, sent through the installed SDK (anthropic, openai) to the loopback
fakes: one test per provider per setting, asserting what arrives on the wire.

The composed request must be the request sent: the fake records the JSON body it received, and
it refuses fields the real API does not know and values out of the real API's range.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from playground import compose as c
from runs.providers import call, wire_request
from tests.playground.test_providers import GPT, SONNET, a_settings, o_settings


def _session(**advanced) -> c.Session:
    return c.Session(
        prompt="Tell me about the contract. END here", advanced=replace(c.Advanced(), **advanced)
    )


def _send(kind: str, fake, session: c.Session):
    model = SONNET if kind == "anthropic" else GPT
    settings = a_settings(fake) if kind == "anthropic" else o_settings(fake)
    comp = c.compose(session, model)
    result = call(settings, comp.request, lambda *_: None)
    sent = fake.requests[-1]
    # Nothing lost, nothing added on the way: the recorded wire body is what the server got.
    assert sent == wire_request(kind, comp.request)
    return comp, result, sent


@pytest.fixture(params=["anthropic", "openai"])
def provider(request, anthropic_fake, openai_fake):
    return request.param, anthropic_fake if request.param == "anthropic" else openai_fake


def test_max_tokens_is_always_sent(provider):
    kind, fake = provider
    _, result, sent = _send(kind, fake, _session(max_tokens=777))
    key = "max_tokens" if kind == "anthropic" else "max_completion_tokens"
    assert sent[key] == 777
    assert result.text.startswith("Echo:")


def test_temperature_is_sent_only_when_enabled(provider):
    kind, fake = provider
    _, result, sent = _send(kind, fake, _session(temperature=c.Override(True, 0.3)))
    assert sent["temperature"] == 0.3
    assert result.text.startswith("Echo:")
    _, _, sent = _send(kind, fake, _session(temperature=c.Override(False, 0.3)))
    assert "temperature" not in sent


def test_top_p_is_sent_only_when_enabled(provider):
    kind, fake = provider
    _, result, sent = _send(kind, fake, _session(top_p=c.Override(True, 0.85)))
    assert sent["top_p"] == 0.85
    assert result.text.startswith("Echo:")
    _, _, sent = _send(kind, fake, _session(top_p=c.Override(False, 0.85)))
    assert "top_p" not in sent


def test_top_k(provider):
    kind, fake = provider
    comp, result, sent = _send(kind, fake, _session(top_k=c.Override(True, 12)))
    assert result.text.startswith("Echo:")
    if kind == "anthropic":
        assert sent["top_k"] == 12 and isinstance(sent["top_k"], int)
    else:  # Chat Completions has no top_k: not sent, and the page says so
        assert "top_k" not in sent
        assert any(n.startswith("top_k: not sent") for n in comp.notes)


def test_stop_sequences_are_sent_and_stop_the_answer(provider):
    kind, fake = provider
    _, result, sent = _send(kind, fake, _session(stop_enabled=True, stop_sequences=("END", "###")))
    key = "stop_sequences" if kind == "anthropic" else "stop"
    assert sent[key] == ["END", "###"]
    assert "END" not in result.text and result.text.startswith("Echo: Tell me")
    assert result.stop_reason == ("stop_sequence" if kind == "anthropic" else "stop")
    _, _, sent = _send(kind, fake, _session(stop_enabled=False, stop_sequences=("END",)))
    assert key not in sent


def test_thinking_budget(provider):
    kind, fake = provider
    session = c.set_thinking(_session(temperature=c.Override(True, 0.2)), True)
    session = replace(session, advanced=c.set_thinking_budget(session.advanced, 2048))
    comp, result, sent = _send(kind, fake, session)
    assert result.thinking
    if kind == "anthropic":
        assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
        assert sent["max_tokens"] == 16_000
    else:
        assert sent["reasoning_effort"] == "low"
    assert "temperature" not in sent  # switched off by thinking


def test_all_settings_together(provider):
    kind, fake = provider
    session = _session(
        max_tokens=900,
        temperature=c.Override(True, 0.5),
        top_p=c.Override(True, 0.9),
        top_k=c.Override(True, 5),
        stop_enabled=True,
        stop_sequences=("END",),
    )
    _, result, sent = _send(kind, fake, session)
    assert sent["temperature"] == 0.5 and sent["top_p"] == 0.9
    assert ("top_k" in sent) == (kind == "anthropic")
    assert result.text == "Echo: Tell me about the contract. "
