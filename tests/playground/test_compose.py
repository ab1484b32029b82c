"""Pure composition: the request each toggle combination produces, and the smart behaviours."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from playground import compose as c
from runs.protocol.schemas import default_registry

SONNET = c.ModelSpec("anthropic", "claude-sonnet-4-6", context_window=200_000)
GPT = c.ModelSpec("openai", "gpt-5-mini", max_tokens_param="max_completion_tokens")
LOCAL = c.ModelSpec("openai", "llama-3.2-3b", supports_thinking=False, supports_pdf=False)
DOC = c.Document("contract.txt", "text/plain", "Payment is due within 30 days. Liability is capped.")
PDF_DOC = c.Document("contract.pdf", "application/pdf", "JVBERi0xLjQKJcfs")
SYSTEM = "You are a careful legal assistant."
EPH = {"type": "ephemeral"}
SCHEMAS = default_registry()


def session(**kw) -> c.Session:
    base = {"prompt": "Analyze payment terms", "system_prompt": SYSTEM, "document": DOC}
    base.update(kw)
    return c.Session(**base)


def reply(text: str = "Net 30.") -> list[dict]:
    return [{"type": "text", "text": text}]


# -- the seed's scenarios --------------------------------------------------------------------


def test_scenario_create_cache_with_document_marks_system_and_document():
    comp = c.compose(session(create_cache=True), SONNET)
    assert comp.request == {
        "model": "claude-sonnet-4-6",
        "max_tokens": 4096,
        "system": [{"type": "text", "text": SYSTEM, "cache_control": EPH}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": DOC.data},
                        "title": "contract.txt",
                        "cache_control": EPH,
                    },
                    {"type": "text", "text": "Analyze payment terms"},
                ],
            }
        ],
    }
    assert len(comp.cache_keys) == 2
    assert comp.flags["create_cache"] and comp.flags["system_prompt"] and comp.flags["file"]


def test_no_cache_sends_plain_system_string_and_plain_prompt_without_file():
    comp = c.compose(session(send_file=False), SONNET)
    assert comp.request["system"] == SYSTEM
    assert comp.request["messages"] == [{"role": "user", "content": "Analyze payment terms"}]
    assert comp.user_content == "Analyze payment terms"


def test_system_prompt_toggle_off_sends_no_system():
    comp = c.compose(session(send_system_prompt=False, document=None), SONNET)
    assert "system" not in comp.request
    assert comp.flags["system_prompt"] is False


def test_pdf_is_sent_as_base64_document():
    comp = c.compose(session(document=PDF_DOC), SONNET)
    doc = comp.request["messages"][0]["content"][0]
    assert doc["source"] == {"type": "base64", "media_type": "application/pdf", "data": PDF_DOC.data}


def test_citations_go_on_the_document_block():
    comp = c.compose(session(citations=True), SONNET)
    assert comp.request["messages"][0]["content"][0]["citations"] == {"enabled": True}
    openai = c.compose(session(citations=True), GPT)
    assert any("citations" in n for n in openai.notes)


def test_thinking_parameter_and_incompatible_sampling_is_not_sent():
    s = c.set_thinking(session(document=None), True)
    s = replace(
        s,
        advanced=replace(
            s.advanced,
            temperature=c.Override(True, 0.2),
            top_k=c.Override(True, 20),
            top_p=c.Override(True, 0.5),
        ),
    )
    comp = c.compose(s, SONNET)
    assert comp.request["thinking"] == {"type": "enabled", "budget_tokens": 10_000}
    assert comp.request["max_tokens"] == 16_000
    assert "temperature" not in comp.request and "top_k" not in comp.request and "top_p" not in comp.request
    assert len(comp.notes) == 3


def test_overrides_only_sent_when_enabled():
    adv = c.Advanced(
        temperature=c.Override(False, 0.3),
        top_p=c.Override(True, 0.9),
        top_k=c.Override(True, 12),
        stop_enabled=True,
        stop_sequences=("END", "STOP"),
    )
    comp = c.compose(session(document=None, advanced=adv), SONNET)
    assert "temperature" not in comp.request
    assert comp.request["top_p"] == 0.9 and comp.request["top_k"] == 12
    assert comp.request["stop_sequences"] == ["END", "STOP"]
    no_stops = c.compose(session(document=None, advanced=replace(adv, stop_enabled=False)), SONNET)
    assert "stop_sequences" not in no_stops.request
    empty = c.compose(session(document=None, advanced=replace(adv, stop_sequences=())), SONNET)
    assert "stop_sequences" not in empty.request


@pytest.mark.parametrize(
    "system,file,cache,thinking,citations",
    list(itertools.product([True, False], repeat=5)),
)
def test_every_toggle_combination_produces_a_well_formed_request(system, file, cache, thinking, citations):
    s = session(send_system_prompt=system, send_file=file, create_cache=cache, citations=citations)
    s = c.set_thinking(s, thinking)
    comp = c.compose(s, SONNET)
    req = comp.request
    assert ("system" in req) == system
    if system:
        assert isinstance(req["system"], list) == cache
    content = req["messages"][-1]["content"]
    if file:
        doc = content[0]
        assert doc["type"] == "document"
        assert ("cache_control" in doc) == cache
        assert ("citations" in doc) == citations
        assert content[-1] == {"type": "text", "text": "Analyze payment terms"}
    else:
        assert content == "Analyze payment terms"
    assert ("thinking" in req) == thinking
    if thinking:
        assert req["thinking"]["budget_tokens"] < req["max_tokens"]
    marks = str(req).count("cache_control")
    assert marks == (int(cache and system) + int(cache and file))
    # the OpenAI translation of the same session never carries Anthropic-only markers
    oa = c.compose(s, GPT).request
    assert "cache_control" not in str(oa) and "citations" not in str(oa)
    assert ("reasoning_effort" in oa) == thinking


# -- the seed's two bug stories --------------------------------------------------------------


def test_bug_message_order_history_comes_before_the_new_prompt_with_cached_document():
    """Phase 1.7: with caching and a file, the new message was put before the history."""
    first = session(create_cache=True)
    comp1 = c.compose(first, SONNET)
    after = c.after_send(first, comp1, reply())
    follow = replace(after, prompt="Check liability clauses")
    comp2 = c.compose(follow, SONNET)
    msgs = comp2.request["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert msgs[0]["content"] == comp1.request["messages"][0]["content"]
    assert msgs[1]["content"] == reply()
    new_text = msgs[-1]["content"][-1]
    assert new_text == {"type": "text", "text": "Check liability clauses"}
    # the prompt is never dropped because a file is attached
    assert "Check liability clauses" in str(msgs[-1])


def test_bug_content_structure_is_preserved_so_the_follow_up_replays_the_exact_prefix():
    """Phase 1.8: history kept only text, so the replay lost the document and missed the cache."""
    first = session(create_cache=True)
    comp1 = c.compose(first, SONNET)
    after = c.after_send(first, comp1, reply())
    assert after.history[0]["content"] == comp1.request["messages"][0]["content"]
    assert after.history[0]["content"][0]["type"] == "document"
    assert after.history[0]["content"][0]["cache_control"] == EPH
    follow = replace(after, prompt="Check liability clauses", send_file=False)
    comp2 = c.compose(follow, SONNET)
    # byte-identical prefix: system and the first user turn exactly as sent the first time
    assert comp2.request["system"] == comp1.request["system"]
    assert comp2.request["messages"][0] == comp1.request["messages"][0]
    # and the history survives a round trip through the page's JSON
    again = c.session_from_json(c.session_to_json(follow))
    assert c.compose(again, SONNET).request == comp2.request


def test_create_cache_turns_itself_off_and_the_cached_blocks_stay_marked():
    first = session(mode="stateless", create_cache=True)
    comp1 = c.compose(first, SONNET)
    after = c.after_send(first, comp1, reply())
    assert after.create_cache is False
    assert after.history == ()  # stateless keeps no history
    comp2 = c.compose(replace(after, prompt="Another question"), SONNET)
    # Scenario 3: the same system prompt and document still carry the marker -> cache read
    assert comp2.request["system"][0]["cache_control"] == EPH
    assert comp2.request["messages"][0]["content"][0]["cache_control"] == EPH
    assert (
        comp2.request["messages"][0]["content"][0]["source"]
        == comp1.request["messages"][0]["content"][0]["source"]
    )
    # a different document is not marked
    other = replace(after, prompt="x", document=c.Document("b.txt", "text/plain", "Other"))
    assert "cache_control" not in c.compose(other, SONNET).request["messages"][0]["content"][0]


def test_at_most_four_cache_breakpoints_oldest_history_markers_go():
    s = session(create_cache=True)
    for i in range(4):
        comp = c.compose(s, SONNET)
        s = replace(c.after_send(s, comp, reply()), prompt=f"q{i}", create_cache=True)
    comp = c.compose(s, SONNET)
    assert str(comp.request).count("cache_control") == 4
    assert comp.request["messages"][-1]["content"][0]["cache_control"] == EPH
    assert any("removed" in n for n in comp.notes)


# -- modes -----------------------------------------------------------------------------------


def test_stateless_mode_sends_no_history_and_switching_clears_it():
    s = session(create_cache=True)
    comp = c.compose(s, SONNET)
    s = c.after_send(s, comp, reply())
    assert len(s.history) == 2
    cleared = c.set_mode(s, "stateless")
    assert cleared.history == () and cleared.mode == "stateless"
    assert cleared.cached == s.cached  # cache settings untouched
    with pytest.raises(c.ComposeError) as err:
        c.compose(replace(s, mode="stateless"), SONNET)
    assert err.value.field == "history"
    back = c.set_mode(cleared, "stateful")
    assert back.history == () and back.mode == "stateful"


def test_thinking_blocks_of_history_are_kept_only_while_thinking_is_on():
    s = c.set_thinking(session(document=None), True)
    comp = c.compose(s, SONNET)
    answer = [{"type": "thinking", "thinking": "hmm", "signature": "sig"}, {"type": "text", "text": "ok"}]
    s = replace(c.after_send(s, comp, answer), prompt="next")
    assert c.compose(s, SONNET).request["messages"][1]["content"] == answer
    off = c.set_thinking(s, False)
    assert c.compose(off, SONNET).request["messages"][1]["content"] == [{"type": "text", "text": "ok"}]


# -- smart behaviours ------------------------------------------------------------------------


def test_thinking_on_raises_max_tokens_and_locks_temperature():
    s = session(advanced=c.Advanced(max_tokens=4096, temperature=c.Override(True, 0.4)))
    on = c.apply_change(s, "thinking", True)
    assert on.advanced.max_tokens == 16_000
    assert on.advanced.temperature.enabled is False
    assert c.apply_change(on, "temperature_enabled", True).advanced.temperature.enabled is False
    off = c.apply_change(on, "thinking", False)
    assert c.apply_change(off, "temperature_enabled", True).advanced.temperature.enabled is True
    # enough room already: max tokens is left alone
    roomy = session(advanced=c.Advanced(max_tokens=32_000))
    assert c.apply_change(roomy, "thinking", True).advanced.max_tokens == 32_000
    big_budget = session(advanced=c.Advanced(max_tokens=4096, thinking_budget=30_000))
    on2 = c.apply_change(big_budget, "thinking", True)
    assert on2.advanced.thinking_budget < on2.advanced.max_tokens


def test_max_tokens_change_keeps_budget_below_it_with_minimum_1024():
    s = session(advanced=c.Advanced(max_tokens=16_000, thinking_budget=10_000))
    s = c.apply_change(s, "max_tokens", 8000)
    assert s.advanced.thinking_budget == 7000
    s = c.apply_change(s, "max_tokens", 1500)
    assert s.advanced.thinking_budget == 1024
    s = c.apply_change(s, "max_tokens", 999_999)
    assert s.advanced.max_tokens == 200_000
    s = c.apply_change(s, "thinking_budget", 10)
    assert s.advanced.thinking_budget == 1024
    s = c.apply_change(s, "thinking_budget", 500_000)
    assert s.advanced.thinking_budget == 199_999


def test_invalid_thinking_budget_is_refused_not_sent():
    s = replace(session(thinking=True), advanced=c.Advanced(max_tokens=2000, thinking_budget=4000))
    with pytest.raises(c.ComposeError) as err:
        c.compose(s, SONNET)
    assert err.value.field == "thinking_budget"


def test_stop_sequences_at_most_four_and_reset_all():
    s = session()
    for word in ["a", "b", "b", "", "c", "d", "e"]:
        s = c.apply_change(s, "add_stop_sequence", word)
    assert s.advanced.stop_sequences == ("a", "b", "c", "d")
    s = c.apply_change(s, "remove_stop_sequence", 1)
    assert s.advanced.stop_sequences == ("a", "c", "d")
    s = c.apply_change(s, "top_k_enabled", True)
    s = c.apply_change(s, "reset_advanced", None)
    assert s.advanced == c.Advanced()
    assert s.advanced.max_tokens == 4096 and s.advanced.thinking_budget == 10_000
    assert s.advanced.top_k == c.Override(False, 40)


def test_session_json_rejects_bad_input_with_the_field_name():
    with pytest.raises(c.ComposeError) as err:
        c.session_from_json({"mode": "chatty"})
    assert err.value.field == "mode"
    with pytest.raises(c.ComposeError) as err:
        c.session_from_json({"file": {"name": "x.exe", "media_type": "application/x-msdownload", "data": ""}})
    assert err.value.field == "file"
    with pytest.raises(c.ComposeError):
        c.session_from_json({"advanced": {"stop_sequences": ["1", "2", "3", "4", "5"]}})
    with pytest.raises(c.ComposeError):
        c.compose(c.Session(prompt="  "), SONNET)


# -- operation types -------------------------------------------------------------------------


@pytest.mark.parametrize("op", [o for o in c.OPERATION_TYPES if o != "generic"])
def test_structured_operations_force_a_tool_with_the_registered_schema(op):
    schema = SCHEMAS.get(f"playground.{op}")
    comp = c.compose(session(document=None, operation_type=op), SONNET, schema)
    tool = comp.request["tools"][-1]
    assert tool["name"] == f"record_{op}" == comp.output_tool
    assert tool["input_schema"]["properties"] == schema["properties"]
    assert comp.request["tool_choice"] == {"type": "tool", "name": f"record_{op}"}
    oa = c.compose(session(document=None, operation_type=op), GPT, schema).request
    assert oa["response_format"]["type"] == "json_schema"
    assert oa["response_format"]["json_schema"]["schema"]["required"] == schema["required"]


def test_structured_with_thinking_asks_for_the_tool_instead_of_forcing_it():
    s = c.set_thinking(session(document=None, operation_type="validation"), True)
    comp = c.compose(s, SONNET, SCHEMAS.get("playground.validation"))
    assert comp.request["tool_choice"] == {"type": "auto"}
    assert comp.request["system"][0] == {"type": "text", "text": SYSTEM}
    assert "record_validation" in comp.request["system"][-1]["text"]


def test_generic_operation_sends_no_tools():
    comp = c.compose(session(), SONNET, SCHEMAS.get("playground.generic"))
    assert "tools" not in comp.request and "tool_choice" not in comp.request


# -- tool use --------------------------------------------------------------------------------

WEATHER = c.Tool(
    "get_weather",
    "Weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def test_tool_use_round_trip_needs_a_result_for_each_call():
    s = session(document=None, tool_use=True, tools=(WEATHER,), prompt="Use get_weather for Paris")
    comp = c.compose(s, SONNET)
    assert comp.request["tools"] == [
        {"name": "get_weather", "description": "Weather for a city", "input_schema": WEATHER.input_schema}
    ]
    answer = [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]
    s = replace(c.after_send(s, comp, answer), prompt="")
    with pytest.raises(c.ComposeError) as err:
        c.compose(s, SONNET)
    assert err.value.field == "tool_results"
    s = replace(s, tool_results={"toolu_1": "18°C, cloudy"}, prompt="And tomorrow?")
    comp2 = c.compose(s, SONNET)
    assert comp2.request["messages"][-1]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18°C, cloudy"},
        {"type": "text", "text": "And tomorrow?"},
    ]
    oa = c.compose(s, GPT).request["messages"]
    assert oa[-3]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city":"Paris"}'}
    assert oa[-2] == {"role": "tool", "tool_call_id": "toolu_1", "content": "18°C, cloudy"}
    assert oa[-1] == {"role": "user", "content": "And tomorrow?"}


def test_a_previous_structured_answer_is_acknowledged_automatically():
    s = session(document=None, operation_type="validation")
    comp = c.compose(s, SONNET, SCHEMAS.get("playground.validation"))
    answer = [
        {
            "type": "tool_use",
            "id": "toolu_9",
            "name": "record_validation",
            "input": {"result": True, "comment": "ok"},
        }
    ]
    s = replace(c.after_send(s, comp, answer), prompt="Why?")
    last = c.compose(s, SONNET, SCHEMAS.get("playground.validation")).request["messages"][-1]["content"]
    assert last[0] == {"type": "tool_result", "tool_use_id": "toolu_9", "content": "Recorded."}


# -- OpenAI-compatible -----------------------------------------------------------------------


def test_openai_request_shape():
    adv = c.Advanced(
        max_tokens=900,
        temperature=c.Override(True, 0.2),
        top_k=c.Override(True, 5),
        stop_enabled=True,
        stop_sequences=("X",),
    )
    comp = c.compose(session(advanced=adv, create_cache=True), GPT)
    req = comp.request
    assert req["messages"][0] == {"role": "system", "content": SYSTEM}
    assert req["messages"][1]["content"][0]["text"].startswith('<document title="contract.txt">')
    assert req["max_completion_tokens"] == 900 and "max_tokens" not in req
    assert req["temperature"] == 0.2 and req["stop"] == ["X"] and "top_k" not in req
    assert any("top_k" in n for n in comp.notes) and any("cache" in n for n in comp.notes)
    local = c.compose(session(advanced=adv), LOCAL).request
    assert local["max_tokens"] == 900


def test_openai_pdf_as_file_part_and_refused_for_a_model_without_pdf_support():
    req = c.compose(session(document=PDF_DOC), GPT).request
    part = req["messages"][1]["content"][0]
    assert part["type"] == "file" and part["file"]["file_data"].startswith("data:application/pdf;base64,")
    with pytest.raises(c.ComposeError) as err:
        c.compose(session(document=PDF_DOC), LOCAL)
    assert err.value.field == "file"


def test_openai_follow_up_repeats_the_same_prefix():
    s = session(create_cache=True)
    comp1 = c.compose(s, GPT)
    s2 = replace(c.after_send(s, comp1, reply()), prompt="More?", send_file=False)
    comp2 = c.compose(s2, GPT)
    assert comp2.request["messages"][:2] == comp1.request["messages"]


# -- restoring a recorded request ------------------------------------------------------------


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"create_cache": True, "citations": True},
        {"send_system_prompt": False, "document": PDF_DOC},
        {"operation_type": "rating"},
        {"thinking": True, "advanced": c.Advanced(max_tokens=20_000, top_p=c.Override(True, 0.97))},
        {
            "advanced": c.Advanced(
                temperature=c.Override(True, 0.1), stop_enabled=True, stop_sequences=("##",)
            )
        },
        {"tool_use": True, "tools": (WEATHER,)},
    ],
)
def test_a_recorded_request_restores_to_a_session_that_recomposes_identically(kw):
    s = session(**kw)
    schema = SCHEMAS.get(f"playground.{s.operation_type}")
    comp = c.compose(s, SONNET, schema)
    if s.mode == "stateful":
        s = replace(c.after_send(s, comp, reply()), prompt="Follow-up", send_file=False)
        comp = c.compose(s, SONNET, schema)
    restored, extra = c.session_from_anthropic_request(comp.request)
    assert extra["model"] == "claude-sonnet-4-6"
    again = c.compose(restored, SONNET, SCHEMAS.get(f"playground.{restored.operation_type}"))
    assert again.request == comp.request


def test_an_openai_request_restores_too():
    s = session(operation_type="classification", advanced=c.Advanced(temperature=c.Override(True, 0.5)))
    schema = SCHEMAS.get("playground.classification")
    comp = c.compose(s, GPT, schema)
    restored, _ = c.session_from_openai_request(comp.request)
    assert restored.operation_type == "classification"
    assert restored.system_prompt == SYSTEM
    assert c.compose(restored, GPT, schema).request["messages"] == comp.request["messages"]
    assert c.compose(restored, GPT, schema).request["temperature"] == 0.5


def test_context_window_use():
    assert c.context_window_use(4000, 288, 200_000) == {
        "used": 4288,
        "window": 200_000,
        "percent": 2.1,
        "remaining": 195_712,
    }
    assert c.context_window_use(10, 10, None) is None
