"""Prompt versions as text for people, their ``{{variables}}`` and a diff between two versions (pure).

    variables("Hi {{ name }}")                  # ["name"]
    compile_body("Hi {{name}}", {"name": "A"})  # "Hi A" (a chat body: each message's content)
    render_version(body, config)               # the lines a version reads as (body, then config)
    diff_lines(old_lines, new_lines)           # [{"kind": "same"|"added"|"removed", "text": ...}]

The host SDK compiles the same way (``workbench_sdk.prompts``); a test holds the two together.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.-]{0,99})\s*\}\}")


def _texts(body: Any) -> list[str]:
    if isinstance(body, str):
        return [body]
    if isinstance(body, list):
        return [m["content"] for m in body if isinstance(m, dict) and isinstance(m.get("content"), str)]
    return []


def variables(body: Any) -> list[str]:
    """The variable names a body uses, in order of first appearance."""
    seen: dict[str, None] = {}
    for text in _texts(body):
        for match in VARIABLE.finditer(text):
            seen.setdefault(match.group(1), None)
    return list(seen)


def _fill(text: str, values: dict[str, Any]) -> str:
    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        return str(values[name]) if name in values else match.group(0)

    return VARIABLE.sub(sub, text)


def compile_body(body: Any, values: dict[str, Any]) -> Any:
    """The body with each ``{{name}}`` in ``values`` replaced (others are left as they are)."""
    if isinstance(body, str):
        return _fill(body, values)
    if isinstance(body, list):
        out: list[Any] = []
        for message in body:
            if isinstance(message, dict) and isinstance(message.get("content"), str):
                message = {**message, "content": _fill(message["content"], values)}
            out.append(message)
        return out
    return body


def render_version(body: Any, config: dict[str, Any]) -> list[str]:
    """A version as the lines a diff compares: each message under its role, then the config."""
    lines: list[str] = []
    if isinstance(body, list):
        for message in body:
            if isinstance(message, dict):
                lines.append(f"[{message.get('role', '?')}]")
                lines.extend(str(message.get("content", "")).splitlines() or [""])
    else:
        lines.extend(str(body).splitlines() or [""])
    if config:
        lines.append("[config]")
        lines.extend(json.dumps(config, sort_keys=True, indent=1, ensure_ascii=False).splitlines())
    return lines


def diff_lines(old: list[str], new: list[str]) -> list[dict[str, str]]:
    """Line diff, every line once: ``same``, ``removed`` (only in old) or ``added`` (only in new)."""
    rows: list[dict[str, str]] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows.extend({"kind": "same", "text": line} for line in old[i1:i2])
            continue
        rows.extend({"kind": "removed", "text": line} for line in old[i1:i2])
        rows.extend({"kind": "added", "text": line} for line in new[j1:j2])
    return rows


def diff_summary(rows: list[dict[str, str]]) -> dict[str, int]:
    return {
        "added": sum(1 for r in rows if r["kind"] == "added"),
        "removed": sum(1 for r in rows if r["kind"] == "removed"),
    }


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested objects as dotted keys (``{"a": {"b": 1}}`` -> ``{"a.b": 1}``); other values as they are."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key in sorted(value, key=str):
            out.update(_flat(value[key], f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value} if prefix else {}


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)


def config_changes(old: Any, new: Any) -> list[dict[str, str]]:
    """What changed between two configs, key by key (dotted paths): ``added``, ``removed`` or
    ``changed`` with the values before and after; keys that stayed the same are left out."""
    before = _flat(old if isinstance(old, dict) else {})
    after = _flat(new if isinstance(new, dict) else {})
    rows = []
    for key in sorted(before.keys() | after.keys()):
        if key not in before:
            rows.append({"key": key, "kind": "added", "old": "", "new": _shown(after[key])})
        elif key not in after:
            rows.append({"key": key, "kind": "removed", "old": _shown(before[key]), "new": ""})
        elif before[key] != after[key]:
            rows.append(
                {"key": key, "kind": "changed", "old": _shown(before[key]), "new": _shown(after[key])}
            )
    return rows
