"""Smart behaviours of the advanced settings: one edit made on the page (``apply_change``), a
compare column's own settings (``with_overrides``) and the session after a send (``after_send``).

Raise max tokens when thinking needs room, keep the budget below max tokens, minimum budget,
temperature locked while thinking, at most four stop sequences, stateless mode clears the
history, "create cache" turns itself off after a send: the page asks the server to apply each
change, so the rules live here once.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from playground.compose.session import (
    MAX_STOP_SEQUENCES,
    MAX_TOKENS_LIMIT,
    MIN_THINKING_BUDGET,
    MODES,
    THINKING_HEADROOM,
    THINKING_MAX_TOKENS,
    Advanced,
    ComposeError,
    Composition,
    Override,
    Session,
    as_int,
    as_number,
)


def clamp_budget(budget: int, max_tokens: int) -> int:
    """A thinking budget of at least 1,024 tokens that stays below max tokens when it can."""
    return max(MIN_THINKING_BUDGET, min(budget, max_tokens - 1))


def set_thinking(session: Session, on: bool) -> Session:
    """Thinking on: make room (max tokens >= budget + headroom, at least 16,000) and drop the
    temperature override, which providers refuse together with thinking."""
    if not on:
        return replace(session, thinking=False)
    adv = session.advanced
    budget = max(adv.thinking_budget, MIN_THINKING_BUDGET)
    max_tokens = adv.max_tokens
    if max_tokens < budget + THINKING_HEADROOM:
        max_tokens = min(MAX_TOKENS_LIMIT, max(THINKING_MAX_TOKENS, budget + THINKING_HEADROOM))
    budget = clamp_budget(budget, max_tokens)
    adv = replace(
        adv,
        max_tokens=max_tokens,
        thinking_budget=budget,
        temperature=replace(adv.temperature, enabled=False),
    )
    return replace(session, thinking=True, advanced=adv)


def set_max_tokens(adv: Advanced, value: int) -> Advanced:
    """Max tokens within 1..200,000; a budget that no longer fits shrinks to max tokens - 1,000."""
    value = max(1, min(MAX_TOKENS_LIMIT, int(value)))
    budget = adv.thinking_budget
    if budget >= value:
        budget = max(MIN_THINKING_BUDGET, value - THINKING_HEADROOM)
    return replace(adv, max_tokens=value, thinking_budget=budget)


def set_thinking_budget(adv: Advanced, value: int) -> Advanced:
    return replace(adv, thinking_budget=clamp_budget(int(value), adv.max_tokens))


def add_stop_sequence(adv: Advanced, value: str) -> Advanced:
    if not value or value in adv.stop_sequences or len(adv.stop_sequences) >= MAX_STOP_SEQUENCES:
        return adv
    return replace(adv, stop_sequences=(*adv.stop_sequences, value))


def remove_stop_sequence(adv: Advanced, index: int) -> Advanced:
    seqs = list(adv.stop_sequences)
    if 0 <= index < len(seqs):
        del seqs[index]
    return replace(adv, stop_sequences=tuple(seqs))


def set_mode(session: Session, mode: str) -> Session:
    """Stateless clears the conversation (and pending tool results); stateful just switches."""
    if mode not in MODES:
        raise ComposeError("mode", "mode is stateful or stateless")
    if mode == "stateless":
        return replace(session, mode=mode, history=(), tool_results={})
    return replace(session, mode=mode)


def apply_change(session: Session, name: str, value: Any) -> Session:
    """One edit made on the page, with the behaviours that go with it."""
    adv = session.advanced
    match name:
        case "mode":
            return set_mode(session, value)
        case "thinking":
            return set_thinking(session, bool(value))
        case "max_tokens":
            return replace(session, advanced=set_max_tokens(adv, as_int(value, name)))
        case "thinking_budget":
            return replace(session, advanced=set_thinking_budget(adv, as_int(value, name)))
        case "temperature_enabled":
            if session.thinking:  # locked while thinking is on
                return session
            return replace(
                session, advanced=replace(adv, temperature=replace(adv.temperature, enabled=bool(value)))
            )
        case "temperature":
            v = min(1.0, max(0.0, as_number(value, name)))
            return replace(session, advanced=replace(adv, temperature=replace(adv.temperature, value=v)))
        case "top_p_enabled":
            return replace(session, advanced=replace(adv, top_p=replace(adv.top_p, enabled=bool(value))))
        case "top_p":
            v = min(1.0, max(0.0, as_number(value, name)))
            return replace(session, advanced=replace(adv, top_p=replace(adv.top_p, value=v)))
        case "top_k_enabled":
            return replace(session, advanced=replace(adv, top_k=replace(adv.top_k, enabled=bool(value))))
        case "top_k":
            return replace(
                session, advanced=replace(adv, top_k=replace(adv.top_k, value=max(0, as_int(value, name))))
            )
        case "stop_enabled":
            return replace(session, advanced=replace(adv, stop_enabled=bool(value)))
        case "add_stop_sequence":
            return replace(session, advanced=add_stop_sequence(adv, str(value)))
        case "remove_stop_sequence":
            return replace(session, advanced=remove_stop_sequence(adv, as_int(value, name)))
        case "reset_advanced":
            return replace(session, advanced=Advanced())
        case "clear":
            return replace(session, history=(), tool_results={})
        case _:
            raise ComposeError(name, f"unknown setting {name!r}")


MAX_COMPARE_COLUMNS = 5
COLUMN_FIELDS = ("system_prompt", "prompt", "temperature", "top_p", "top_k", "max_tokens", "thinking")


def with_overrides(session: Session, column: Any) -> Session:
    """One compare column: the session with the column's own prompt, system prompt or sampling
    parameters. Absent (or null) fields keep the session's value; a value given is sent (a
    sampling value turns its override on), after the same smart behaviours as the page's."""
    if not isinstance(column, dict):
        raise ComposeError("compare", "each compare column must be an object")
    unknown = sorted(set(column) - {*COLUMN_FIELDS, "model", "label"})
    if unknown:
        raise ComposeError("compare", f"unknown compare setting {unknown[0]!r}")
    given = {k: column[k] for k in COLUMN_FIELDS if column.get(k) is not None}
    if "system_prompt" in given:
        text = given["system_prompt"]
        if not isinstance(text, str):
            raise ComposeError("compare", "a column's system prompt must be text")
        session = replace(session, system_prompt=text, send_system_prompt=bool(text.strip()))
    if "prompt" in given:
        if not isinstance(given["prompt"], str):
            raise ComposeError("compare", "a column's prompt must be text")
        session = replace(session, prompt=given["prompt"])
    if "thinking" in given:
        if not isinstance(given["thinking"], bool):
            raise ComposeError("compare", "a column's thinking must be true or false")
        session = set_thinking(session, given["thinking"])
    if "max_tokens" in given:
        value = as_int(given["max_tokens"], "max_tokens")
        if not 1 <= value <= MAX_TOKENS_LIMIT:
            raise ComposeError("compare", f"max tokens must be between 1 and {MAX_TOKENS_LIMIT:,}")
        session = replace(session, advanced=set_max_tokens(session.advanced, value))
    for name, low, high in (("temperature", 0.0, 1.0), ("top_p", 0.0, 1.0)):
        if name in given:
            number = as_number(given[name], name)
            if not low <= number <= high:
                raise ComposeError("compare", f"{name} must be between {low:g} and {high:g}")
            override = Override(True, number)
            advanced = session.advanced
            advanced = (
                replace(advanced, temperature=override)
                if name == "temperature"
                else replace(advanced, top_p=override)
            )
            session = replace(session, advanced=advanced)
    if "top_k" in given:
        value = as_int(given["top_k"], "top_k")
        if value < 0:
            raise ComposeError("compare", "top_k must be 0 or more")
        session = replace(session, advanced=replace(session.advanced, top_k=Override(True, value)))
    return session


def after_send(session: Session, composition: Composition, assistant_content: Any) -> Session:
    """The session after a successful send: the exact messages join the history (stateful
    only), "create cache" turns itself off, and the blocks it marked stay marked from now on."""
    history = session.history
    if session.mode == "stateful":
        history = (
            *history,
            {"role": "user", "content": copy.deepcopy(composition.user_content)},
            {"role": "assistant", "content": copy.deepcopy(assistant_content)},
        )
    return replace(
        session,
        history=history,
        create_cache=False,
        cached=session.cached | frozenset(composition.cache_keys),
        tool_results={},
    )
