"""Template helpers for the pages. Everything that comes from a trace is escaped here or by autoescape.

- ``{{ value|json_tree }}``: a collapsible tree of <details> elements (no JS). Every key and scalar is
  passed through ``escape``; depth, node count and string length are capped so a hostile or huge
  event cannot blow up the page.
- ``{{ value|pretty_json }}``: indented JSON text (a plain str: autoescaped by the template).
- Numbers, one layer (runs.presenters.numbers): ``{{ n|thousands }}``/``whole`` (counts, tokens),
  ``{{ ms|ms }}`` (humanised, exact ms in a title), ``{{ ms|millis }}``, ``{{ seconds|duration }}``,
  ``{{ run|run_duration }}``, ``{{ cost_totals|money }}``, ``{{ amount|amount:currency }}``.
- Moments: ``{{ moment|when }}`` (a ``<time>``, "3 min ago" with the exact moment on hover).
- ``{% critical_css %}``: the page frame's CSS inline in ``<head>`` (styled before the first paint).
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from html import escape as _stdlib_escape
from typing import Any

import orjson
from django import template
from django.conf import settings
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from runs.presenters import errors, numbers, times
from runs.web.partials import compare_url as build

register = template.Library()


def escape(text: str) -> str:
    """HTML-escape & < > " ' (what django.utils.html.escape does, without its lazy-string wrapper:
    the tree escapes thousands of strings per page)."""
    return _stdlib_escape(text, quote=True)


MAX_DEPTH = 24
MAX_NODES = 1500
MAX_STRING = 2000
OPEN_DEPTH = 1
PRETTY_LIMIT = 200_000


class _Budget:
    def __init__(self) -> None:
        self.nodes = 0


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        text = value if len(value) <= MAX_STRING else value[:MAX_STRING]
        more = (
            f' <span class="muted">… ({len(value) - MAX_STRING} more characters)</span>'
            if len(value) > MAX_STRING
            else ""
        )
        return f'<span class="s">"{escape(text)}"</span>{more}'
    if value is None:
        return '<span class="l">null</span>'
    if isinstance(value, bool):
        return f'<span class="l">{"true" if value else "false"}</span>'
    if isinstance(value, int | float):
        return f'<span class="n">{escape(repr(value) if isinstance(value, float) else str(value))}</span>'
    return escape(str(value))


def _label(key: Any) -> str:
    if key is None:
        return ""
    if isinstance(key, int):
        return f'<span class="k">[{key}]</span>: '
    text = str(key)
    if len(text) > 200:
        text = text[:200] + "…"
    return f'<span class="k">{escape(text)}</span>: '


def _render(value: Any, key: Any, depth: int, budget: _Budget, parts: list[str]) -> None:
    budget.nodes += 1
    if budget.nodes > MAX_NODES:
        return
    if isinstance(value, dict | list):
        n = len(value)
        if n == 0:
            parts.append(f'<div class="row">{_label(key)}{"{}" if isinstance(value, dict) else "[]"}</div>')
            return
        if depth >= MAX_DEPTH:
            text = orjson.dumps(value).decode()
            clipped = text if len(text) <= MAX_STRING else text[:MAX_STRING] + "…"
            parts.append(
                f'<div class="row">{_label(key)}<span class="muted">(nested too deep)</span> {escape(clipped)}</div>'
            )
            return
        brief = (
            f"{{…}} {n} key{'s' if n != 1 else ''}"
            if isinstance(value, dict)
            else f"[…] {n} item{'s' if n != 1 else ''}"
        )
        opened = " open" if depth < OPEN_DEPTH else ""
        parts.append(f'<details{opened}><summary>{_label(key)}<span class="muted">{brief}</span></summary>')
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for k, v in items:
            if budget.nodes > MAX_NODES:
                parts.append('<div class="row muted">… (more not shown)</div>')
                break
            _render(v, k, depth + 1, budget, parts)
        parts.append("</details>")
        return
    parts.append(f'<div class="row">{_label(key)}{_scalar(value)}</div>')


MACHINE_ACTOR_PREFIX = "judge:"  # a gate judge's decisions (judges app): judge:<name>@<version>


@register.filter
def is_machine(actor: Any) -> bool:
    """Whether ``actor`` (an event's recorder) is a gate judge, not a person or a token."""
    return isinstance(actor, str) and actor.startswith(MACHINE_ACTOR_PREFIX)


@register.filter
def json_tree(value: Any) -> SafeString:
    """Escaped, collapsible JSON tree (see module doc)."""
    parts: list[str] = ['<div class="json-tree">']
    _render(value, None, 0, _Budget(), parts)
    parts.append("</div>")
    return mark_safe("".join(parts))  # every piece of data above went through escape()


@register.filter
def pretty_json(value: Any) -> str:
    """Indented JSON text, capped; returned as a plain str so the template escapes it."""
    try:
        text = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    except TypeError:
        text = repr(value)
    if len(text) > PRETTY_LIMIT:
        text = text[:PRETTY_LIMIT] + f"\n… ({len(text) - PRETTY_LIMIT} more characters)"
    return text


@register.filter
def compact_json(value: Any) -> str:
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= 300 else text[:299] + "…"


@register.filter
def duration(seconds: float | None) -> str:
    """Seconds for people (runs.presenters.numbers.duration_s): ``43 min 37 s``, ``1.2 s``."""
    return numbers.duration_s(seconds)


@register.filter
def run_duration(run: Any) -> str:
    start: datetime | None = getattr(run, "started_at", None)
    end: datetime | None = getattr(run, "ended_at", None)
    if start is None or end is None:
        return ""
    return duration((end - start).total_seconds())


@register.filter
def money(cost_totals: Any) -> str:
    """``{"USD": "3.50058"}`` -> ``USD 3.50`` (several currencies joined; the one money rule of
    runs.presenters.numbers)."""
    return numbers.money_text(cost_totals)


@register.filter
def cost(cost_totals: Any, calls: Any = 0) -> str:
    """A cost cell, never empty (runs.presenters.numbers.cost_text): ``USD 3.50``, ``USD 0`` when
    nothing was called, ``unknown`` when ``calls`` reported no cost."""
    return numbers.cost_text(cost_totals, calls)


@register.filter
def money_exact(cost_totals: Any) -> str:
    """``{"USD": "3.500580000000"}`` -> ``USD 3.50058``: the exact amounts, for a title."""
    return numbers.exact_money(cost_totals)


@register.filter
def get_item(mapping: Any, key: Any) -> Any:
    if isinstance(mapping, dict):
        return mapping.get(key)
    return None


@register.simple_tag(takes_context=True)
def query_with(context: template.Context, **changes: Any) -> str:
    """The current query string with some parameters replaced (None/"" removes them)."""
    request = context.get("request")
    params = request.GET.copy() if request is not None else None
    if params is None:
        from django.http import QueryDict

        params = QueryDict(mutable=True)
    for key, value in changes.items():
        if value is None or value == "":
            params.pop(key, None)
        else:
            params[key] = str(value)
    encoded = params.urlencode()
    return f"?{encoded}" if encoded else "?"


_RANDOM_HEAD = re.compile(r"[0-9a-f]{8}", re.IGNORECASE)


@register.filter
def short_id(run_id: Any) -> str:
    """``run_3f2a9c1e-...`` -> ``3f2a9c1e``: enough to tell generated ids apart at a glance. A
    readable id keeps its words (``run_demo_jobsearch_retry`` -> ``demo_jobsearch_retry``), cut at
    24 characters."""
    text = str(run_id or "")
    body = text.split("_", 1)[1] if "_" in text else text
    if len(body) <= 12:
        return text
    if _RANDOM_HEAD.fullmatch(body[:8]) and not body[:8].isalpha():
        return body[:8]
    return body if len(body) <= 24 else body[:23] + "…"


@register.filter
def subject_text(subject: Any) -> str:
    """Who or what a run is about: the subject's user, tenant and plan, as set by the pipeline."""
    if not isinstance(subject, dict):
        return ""
    return " · ".join(str(subject[k]) for k in ("userId", "tenantId", "planId") if subject.get(k))


@register.filter
def highlight(text: Any, needle: Any) -> SafeString:
    """``text`` escaped, with each case-insensitive occurrence of ``needle`` in <mark>."""
    import re

    from django.utils.html import escape as html_escape
    from django.utils.safestring import mark_safe

    text = "" if text is None else str(text)
    needle = "" if needle is None else str(needle)
    if not needle:
        return mark_safe(html_escape(text))
    parts = re.split(f"({re.escape(needle)})", text, flags=re.IGNORECASE)
    return mark_safe(
        "".join(f"<mark>{html_escape(p)}</mark>" if i % 2 else html_escape(p) for i, p in enumerate(parts))
    )


@register.filter
def millis(ms: Any) -> str:
    """Milliseconds for people (runs.presenters.numbers.duration_ms): ``850 ms``, ``1.2 s``, ``43 min 37 s``."""
    return numbers.duration_ms(ms)


@register.filter
def ms(value: Any) -> SafeString:
    """A duration in ms, humanised, with the exact milliseconds in its title:
    ``<span title="2,617,400 ms">43 min 37 s</span>`` (``unknown`` when None)."""
    human = numbers.duration_ms(value)
    if not human:
        return mark_safe(numbers.UNKNOWN if value is None else escape(str(value)))
    return mark_safe(f'<span title="{escape(numbers.exact_ms(value))}">{escape(human)}</span>')


@register.filter
def thousands(value: Any) -> str:
    """A count with thousands separators (12,345); ``unknown`` when None (runs.presenters.numbers.count)."""
    return numbers.count(value)


@register.filter
def amount(value: Any, currency: Any = "USD") -> str:
    """A money amount by the one rule of runs.presenters.numbers.money: the currency's minor unit
    (USD: 2 decimals) from one minor unit up, 2 significant digits below it (never 0), 0 as 0."""
    return numbers.money(value, str(currency or "USD"))


@register.filter
def whole(value: Any) -> str:
    """A count (tokens) with thousands separators; ``unknown`` when None."""
    return numbers.count(value)


@register.simple_tag
def compare_url(a: Any, b: Any, **params: Any) -> str:
    """``{% compare_url source_id fork_id %}``: the shareable compare page of two runs."""

    return build(str(a), str(b), **{k: str(v) for k, v in params.items()})


@register.filter
def when(value: Any) -> SafeString | str:
    """``{{ moment|when }}``: one way to show a moment on every page, a ``<time>`` that says how long
    ago ("3 min ago", runs.presenters.times) with the exact moment on hover; static/workbench/shell.js
    keeps the words fresh while the page stays open. Not a moment: the value as text."""
    at = times.moment(value)
    if at is None:
        return "" if value in (None, "") else str(value)
    return format_html(
        '<time datetime="{}" title="{}" data-rel>{}</time>',
        times.iso(at),
        times.absolute(at),
        times.relative(at, timezone.now()),
    )


@register.simple_tag
def url_if_exists(name: str, *args: Any) -> str:
    """``{% url_if_exists "app:name" as url %}``: the URL, or "" when no such route exists (a page
    another part of the project may add, such as the dashboard)."""
    try:
        return reverse(name, args=args or None)
    except NoReverseMatch:
        return ""


@register.filter
def gate_key(gate: Any) -> str:
    """A pending gate's stable DOM key (step, gate, checkpoint): its fields keep their ids when other
    gates come and go, so a live morph (static/workbench/morph.js) keeps what was typed in each."""
    parts = (
        [str(gate.get(k) or "") for k in ("stepId", "gate", "checkpoint")]
        if isinstance(gate, dict)
        else [str(gate)]
    )
    return hashlib.blake2b("\x1f".join(parts).encode(), digest_size=5).hexdigest()


@register.simple_tag
def critical_css() -> SafeString:
    """The page frame's CSS as an inline ``<style>`` (static/workbench/critical.css, a file of the
    project, never user data); the CSP allows it by its hash (settings.WORKBENCH_CRITICAL_CSS_SOURCE)."""
    return mark_safe(f"<style>{settings.WORKBENCH_CRITICAL_CSS}</style>")  # noqa: S308 - our own file


@register.filter
def error_words(error: Any, code: Any = "") -> SafeString:
    """A stored error (``"NOT_EXECUTABLE: the workbench has ..."``) as a sentence with its code as a
    small tag: ``The workbench has ... <code class="error-code">NOT_EXECUTABLE</code>``. A code kept
    apart from its message: ``{{ job.error_message|error_words:job.error_code }}``."""
    if code:
        error = f"{code}: {error or ''}"
    code, words = errors.split(error)
    tag = f' <code class="error-code">{escape(code)}</code>' if code else ""
    return mark_safe(f"{escape(words)}{tag}")
