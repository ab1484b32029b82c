"""Caching guidance: a warning when the prefix marked for caching is below the provider's
minimum, for both providers; the real usage (not the toggle) says whether the cache was hit."""

from __future__ import annotations

from dataclasses import replace

from playground import compose as c
from runs.providers import call
from tests.playground.test_providers import SONNET, a_settings

HAIKU = c.ModelSpec("anthropic", "claude-haiku-4-5")
GPT = c.ModelSpec("openai", "gpt-5-mini")
BIG = "Clause. " * 700  # about 1,400 tokens


def _cache_notes(comp):
    return [n for n in comp.notes if "caches" in n and "from" in n]


def test_anthropic_warns_below_the_minimum_and_not_above():
    small = c.compose(c.Session(prompt="q", system_prompt="Short.", create_cache=True), SONNET)
    assert _cache_notes(small) and "1,024 tokens" in _cache_notes(small)[0]
    big = c.Session(prompt="q", system_prompt=BIG, create_cache=True)
    assert not _cache_notes(c.compose(big, SONNET))
    # Haiku needs 2,048: the same prefix is too short there.
    assert "2,048" in _cache_notes(c.compose(big, HAIKU))[0]
    # No marker, no warning.
    assert not _cache_notes(c.compose(c.Session(prompt="q", system_prompt="Short."), SONNET))


def test_openai_warns_when_the_whole_prompt_is_too_short():
    assert _cache_notes(c.compose(c.Session(prompt="q", create_cache=True), GPT))
    assert not _cache_notes(c.compose(c.Session(prompt="q", system_prompt=BIG, create_cache=True), GPT))


def test_a_cache_hit_comes_from_the_usage_of_the_answer(anthropic_fake):
    anthropic_fake.min_cache_tokens = 1024
    settings = a_settings(anthropic_fake)
    small = c.Session(prompt="q", system_prompt="Short.", create_cache=True)
    r = call(settings, c.compose(small, SONNET).request, lambda *_: None)
    assert r.usage.cache_write_tokens == 0 and r.usage.cache_read_tokens == 0  # as warned
    big = c.Session(prompt="q", system_prompt=BIG, create_cache=True)
    comp = c.compose(big, SONNET)
    first = call(settings, comp.request, lambda *_: None)
    assert first.usage.cache_write_tokens > 1024
    again = replace(c.after_send(big, comp, first.content), prompt="again")
    second = call(settings, c.compose(again, SONNET).request, lambda *_: None)
    assert second.usage.cache_read_tokens == first.usage.cache_write_tokens
