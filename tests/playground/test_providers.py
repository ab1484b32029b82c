"""Provider adapters through the real SDKs against the loopback fakes (no internet)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from playground import compose as c
from playground import operations
from runs.providers import ProviderError, ProviderSettings, call
from tests.fakes.openai_api import FakeOpenAI

SONNET = c.ModelSpec("anthropic", "claude-sonnet-4-6")
GPT = c.ModelSpec("openai", "gpt-5-mini", max_tokens_param="max_completion_tokens")
CONTRACT = c.Document("contract.txt", "text/plain", "Payment is due within 30 days. " * 40)


# The fakes listen on loopback, which calls may only reach with the operator's allowance.
LOOPBACK = ("127.0.0.0/8",)


def a_settings(fake, **kw) -> ProviderSettings:
    kw.setdefault("egress_allow", LOOPBACK)
    return ProviderSettings("anthropic", api_key="test-anthropic-key", base_url=fake.url, max_retries=0, **kw)


def o_settings(fake, **kw) -> ProviderSettings:
    kw.setdefault("api_key", "test-openai-key")
    kw.setdefault("egress_allow", LOOPBACK)
    return ProviderSettings("openai", base_url=fake.url + "/v1", max_retries=0, **kw)


def send(settings, comp):
    deltas: list[tuple[str, str]] = []
    result = call(settings, comp.request, lambda kind, text: deltas.append((kind, text)))
    return result, deltas


def test_anthropic_streams_thinking_then_text_with_citations(anthropic_fake):
    s = c.set_thinking(
        c.Session(prompt="What are the payment terms?", document=CONTRACT, citations=True), True
    )
    comp = c.compose(s, SONNET)
    result, deltas = send(a_settings(anthropic_fake), comp)
    kinds = [k for k, _ in deltas]
    assert kinds.index("thinking") < kinds.index("text")
    assert "".join(t for k, t in deltas if k == "text") == result.text
    assert result.content[0]["type"] == "thinking" and result.content[0]["signature"].startswith("sig_")
    assert result.thinking.startswith("The user asks")
    assert result.citations and result.citations[0]["cited_text"] == "Payment is due within 30 days."
    assert result.usage.reasoning_tokens and result.usage.reasoning_tokens <= result.usage.output_tokens
    assert anthropic_fake.requests[-1]["stream"] is True
    assert anthropic_fake.requests[-1]["thinking"] == {"type": "enabled", "budget_tokens": 10_000}


def test_bug_story_follow_up_is_a_cache_hit_when_the_structure_is_preserved(anthropic_fake):
    settings = a_settings(anthropic_fake)
    s = c.Session(
        prompt="Analyze payment terms",
        system_prompt="You are a lawyer. " * 20,
        document=CONTRACT,
        create_cache=True,
    )
    comp1 = c.compose(s, SONNET)
    r1, _ = send(settings, comp1)
    assert r1.usage.cache_write_tokens > 0 and r1.usage.cache_read_tokens == 0
    s2 = replace(c.after_send(s, comp1, r1.content), prompt="Check liability clauses", send_file=False)
    r2, _ = send(settings, c.compose(s2, SONNET))
    assert r2.usage.cache_read_tokens == r1.usage.cache_write_tokens
    assert r2.usage.cache_write_tokens == 0

    # What the seed's bug did: keep only the text of the first turn -> a new cache write, no read.
    broken = replace(s2, history=({"role": "user", "content": "Analyze payment terms"}, s2.history[1]))
    r3, _ = send(settings, c.compose(broken, SONNET))
    assert r3.usage.cache_read_tokens < r1.usage.cache_write_tokens


def test_bug_story_wrong_message_order_is_refused_and_the_composed_order_is_accepted(anthropic_fake):
    settings = a_settings(anthropic_fake)
    s = c.Session(prompt="Analyze payment terms", document=CONTRACT, create_cache=True)
    comp1 = c.compose(s, SONNET)
    r1, _ = send(settings, comp1)
    s2 = replace(c.after_send(s, comp1, r1.content), prompt="Check liability clauses", create_cache=True)
    comp2 = c.compose(s2, SONNET)
    wrong = dict(comp2.request, messages=[comp2.request["messages"][-1], *comp2.request["messages"][:-1]])
    with pytest.raises(ProviderError) as err:
        call(settings, wrong, lambda *_: None)
    assert err.value.code == "INVALID_REQUEST" and err.value.status == 400
    result, _ = send(settings, comp2)
    assert result.text.endswith("Check liability clauses")


@pytest.mark.parametrize("op", ["validation", "extraction", "rating", "classification", "analysis"])
def test_anthropic_structured_answers_validate(anthropic_fake, op):
    s = c.Session(prompt="Is the contract compliant?", operation_type=op)
    comp = c.compose(s, SONNET, operations.get(op).schema)
    result, deltas = send(a_settings(anthropic_fake), comp)
    assert any(k == "tool_input" for k, _ in deltas)
    outcome = operations.check(op, result, comp.output_tool)
    assert outcome.ok, outcome.error


def test_anthropic_structured_with_thinking_uses_auto_tool_choice(anthropic_fake):
    s = c.set_thinking(c.Session(prompt="Does the contract fail GDPR?", operation_type="validation"), True)
    comp = c.compose(s, SONNET, operations.get("validation").schema)
    result, _ = send(a_settings(anthropic_fake), comp)
    outcome = operations.check("validation", result, comp.output_tool)
    assert outcome.value == {"result": False, "comment": "Checked: Does the contract fail GDPR?"}


def test_invalid_structured_answer_is_caught_before_it_is_shown(anthropic_fake):
    anthropic_fake.script({"tool": "record_rating", "input": {"score": "ten"}})
    s = c.Session(prompt="Rate it", operation_type="rating")
    comp = c.compose(s, SONNET, operations.get("rating").schema)
    result, _ = send(a_settings(anthropic_fake), comp)
    outcome = operations.check("rating", result, comp.output_tool)
    assert not outcome.ok and outcome.raw == {"score": "ten"}
    assert "rationale" in outcome.error or "number" in outcome.error


def test_anthropic_tool_use_round_trip(anthropic_fake):
    tool = c.Tool(
        "get_weather",
        "Weather",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )
    s = c.Session(prompt="Use get_weather for Paris", tool_use=True, tools=(tool,))
    comp = c.compose(s, SONNET)
    result, _ = send(a_settings(anthropic_fake), comp)
    assert result.stop_reason == "tool_use"
    assert result.tool_calls[0]["name"] == "get_weather" and result.tool_calls[0]["input"] == {
        "city": "city example"
    }
    s2 = replace(
        c.after_send(s, comp, result.content),
        prompt="Thanks",
        tool_results={result.tool_calls[0]["id"]: "18°C"},
    )
    r2, _ = send(a_settings(anthropic_fake), c.compose(s2, SONNET))
    assert r2.text == "Echo: Thanks"


@pytest.mark.parametrize(
    "status,code",
    [
        (429, "RATE_LIMITED"),
        (401, "AUTHENTICATION_FAILED"),
        (529, "OVERLOADED"),
        (500, "PROVIDER_ERROR"),
        (400, "INVALID_REQUEST"),
    ],
)
def test_anthropic_errors_carry_a_code_and_the_providers_message(anthropic_fake, status, code):
    anthropic_fake.script({"error": (status, None, f"boom {status}")})
    with pytest.raises(ProviderError) as err:
        send(a_settings(anthropic_fake), c.compose(c.Session(prompt="hi"), SONNET))
    assert err.value.code == code and err.value.status == status
    assert err.value.message == f"boom {status}"


def test_rate_limit_is_retried_by_the_sdk_when_retries_are_allowed(anthropic_fake):
    anthropic_fake.script({"error": (429, None, "slow down")})
    settings = replace(a_settings(anthropic_fake), max_retries=1)
    result, _ = send(settings, c.compose(c.Session(prompt="hi"), SONNET))
    assert result.text == "Echo: hi"
    assert len(anthropic_fake.requests) == 2


def test_wrong_key_and_mid_stream_error_and_unreachable_server(anthropic_fake):
    with pytest.raises(ProviderError) as err:
        send(
            replace(a_settings(anthropic_fake), api_key="sk-wrong"), c.compose(c.Session(prompt="hi"), SONNET)
        )
    assert err.value.code == "AUTHENTICATION_FAILED"
    with pytest.raises(ProviderError) as err:
        send(a_settings(anthropic_fake), c.compose(c.Session(prompt="go [[stream-error]]"), SONNET))
    assert err.value.code == "OVERLOADED" and "Overloaded" in err.value.message
    dead = ProviderSettings(
        "anthropic",
        api_key="k",
        base_url="http://127.0.0.1:9",
        max_retries=0,
        timeout=2,
        egress_allow=LOOPBACK,
    )
    with pytest.raises(ProviderError) as err:
        send(dead, c.compose(c.Session(prompt="hi"), SONNET))
    assert err.value.code == "PROVIDER_UNREACHABLE"


# -- OpenAI and OpenAI-compatible ------------------------------------------------------------


def test_openai_streams_text_and_reports_usage(openai_fake):
    comp = c.compose(c.Session(prompt="Hello there", system_prompt="Be brief."), GPT)
    result, deltas = send(o_settings(openai_fake), comp)
    assert result.text == "Echo: Hello there" == "".join(t for k, t in deltas if k == "text")
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    sent = openai_fake.requests[-1]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert sent["max_completion_tokens"] == 4096


def test_openai_reasoning_and_cached_prefix(openai_fake):
    s = c.set_thinking(c.Session(prompt="Think about payment", document=CONTRACT), True)
    comp1 = c.compose(s, GPT)
    r1, deltas = send(o_settings(openai_fake), comp1)
    assert r1.thinking.startswith("Reasoning (medium)") and ("thinking", "Reasoning ") in deltas
    assert r1.usage.reasoning_tokens and r1.usage.cache_read_tokens == 0
    s2 = replace(c.after_send(s, comp1, r1.content), prompt="Again", send_file=False)
    r2, _ = send(o_settings(openai_fake), c.compose(s2, GPT))
    assert r2.usage.cache_read_tokens > 0


def test_openai_structured_and_tool_calls(openai_fake):
    comp = c.compose(
        c.Session(prompt="Classify", operation_type="classification"),
        GPT,
        operations.get("classification").schema,
    )
    result, _ = send(o_settings(openai_fake), comp)
    assert operations.check("classification", result).ok
    tool = c.Tool("lookup", "Look up", {"type": "object", "properties": {"q": {"type": "string"}}})
    s = c.Session(prompt="call lookup please", tool_use=True, tools=(tool,))
    comp = c.compose(s, GPT)
    result, _ = send(o_settings(openai_fake), comp)
    assert result.tool_calls[0]["name"] == "lookup" and result.tool_calls[0]["input"] == {"q": "q example"}
    s2 = replace(
        c.after_send(s, comp, result.content), prompt="ok", tool_results={result.tool_calls[0]["id"]: "found"}
    )
    r2, _ = send(o_settings(openai_fake), c.compose(s2, GPT))
    assert r2.text == "Echo: ok"


def test_openai_compatible_server_without_a_key_uses_the_same_path():
    with FakeOpenAI(api_key=None) as local:
        model = c.ModelSpec("openai", "llama-3.2-3b-instruct", supports_thinking=False)
        result, _ = send(o_settings(local, api_key=None), c.compose(c.Session(prompt="hi"), model))
        assert result.text == "Echo: hi"
        assert local.requests[-1]["max_tokens"] == 4096


@pytest.mark.parametrize(
    "status,code",
    [(429, "RATE_LIMITED"), (401, "AUTHENTICATION_FAILED"), (404, "NOT_FOUND"), (503, "OVERLOADED")],
)
def test_openai_errors(openai_fake, status, code):
    openai_fake.script({"error": (status, f"nope {status}")})
    with pytest.raises(ProviderError) as err:
        send(o_settings(openai_fake), c.compose(c.Session(prompt="hi"), GPT))
    assert err.value.code == code and err.value.message == f"nope {status}"
