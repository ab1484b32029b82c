"""Structured outputs for people: JSON with syntax highlighting, and the same value as XML.

Pure functions that return escaped HTML (``<span class="tok-...">``); the page needs no script
and no third-party highlighter, so the CSP stays strict. The XML view maps objects to elements
named after their keys (names XML refuses are kept in a ``key`` attribute of an ``<item>``),
arrays to repeated ``<item>`` elements and scalars to text.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

_TOKEN = re.compile(
    r'(?P<key>"(?:[^"\\]|\\.)*")(?=\s*:)'
    r'|(?P<string>"(?:[^"\\]|\\.)*")'
    r"|(?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)"
    r"|(?P<literal>\btrue\b|\bfalse\b|\bnull\b)"
    r"|(?P<punct>[{}\[\],:])"
)


def json_text(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _spans(text: str, pattern: re.Pattern[str]) -> SafeString:
    out: list[str] = []
    last = 0
    for match in pattern.finditer(text):
        out.append(escape(text[last : match.start()]))
        kind = match.lastgroup
        out.append(f'<span class="tok-{kind}">{escape(match.group())}</span>')
        last = match.end()
    out.append(escape(text[last:]))
    return mark_safe("".join(out))  # every piece above went through escape()


def json_html(value: Any) -> SafeString:
    """Indented JSON of ``value`` as escaped HTML with a span per token."""
    return _spans(json_text(value), _TOKEN)


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


def _xml_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _attr_escape(text: str) -> str:
    return _xml_escape(text).replace('"', "&quot;")


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, int | float):
        return json.dumps(value)
    return _xml_escape(str(value))


def _element(name: str, value: Any, depth: int) -> list[str]:
    pad = "  " * depth
    if _NAME.match(name) and not name.lower().startswith("xml"):
        open_tag, close_tag = f"<{name}", f"</{name}>"
    else:
        open_tag, close_tag = f'<item key="{_attr_escape(name)}"', "</item>"
    if isinstance(value, dict):
        if not value:
            return [f"{pad}{open_tag}/>"]
        lines = [f"{pad}{open_tag}>"]
        for key, child in value.items():
            lines += _element(str(key), child, depth + 1)
        return [*lines, f"{pad}{close_tag}"]
    if isinstance(value, list):
        if not value:
            return [f"{pad}{open_tag}/>"]
        lines = [f"{pad}{open_tag}>"]
        for child in value:
            lines += _element("item", child, depth + 1)
        return [*lines, f"{pad}{close_tag}"]
    if value is None:
        return [f'{pad}{open_tag} nil="true"/>']
    return [f"{pad}{open_tag}>{_scalar(value)}{close_tag}"]


def xml_text(value: Any, root: str = "output") -> str:
    return "\n".join(_element(root, value, 0))


_XML_TOKEN = re.compile(
    r"(?P<tag></?[A-Za-z_][A-Za-z0-9_.-]*|/?>)"
    r'|(?P<attr>[A-Za-z_][A-Za-z0-9_.-]*)(?==")'
    r'|(?P<string>"[^"]*")'
)


def xml_html(value: Any, root: str = "output") -> SafeString:
    """The XML view of ``value`` as escaped HTML with spans for tags, attributes and values."""
    return _spans(xml_text(value, root), _XML_TOKEN)
