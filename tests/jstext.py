"""Oracles taken from the reference's own text: JSON.stringify output recovered from its files.

The conformance files are ``JSON.stringify(value, null, 2)``: dropping the whitespace outside
strings gives ``JSON.stringify(value)`` byte for byte (same key order, same number spelling).
"""

from __future__ import annotations


def minify(text: str) -> str:
    """JSON text without insignificant whitespace (strings untouched)."""
    out: list[str] = []
    in_string = escaped = False
    for ch in text:
        if in_string:
            out.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
            out.append(ch)
        elif ch not in " \t\r\n":
            out.append(ch)
    return "".join(out)


def member_text(text: str, name: str) -> str:
    """The compact text of the top-level member ``name`` of a JSON object's text."""
    compact = minify(text)
    depth = 0
    in_string = escaped = False
    marker = f'"{name}":'
    i = 0
    while i < len(compact):
        ch = compact[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            if depth == 1 and compact.startswith(marker, i) and compact[i - 1] in "{,":
                start = i + len(marker)
                return _value_at(compact, start)
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        i += 1
    raise KeyError(name)


def _value_at(compact: str, start: int) -> str:
    depth = 0
    in_string = escaped = False
    for i in range(start, len(compact)):
        ch = compact[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
                if depth == 0:
                    return compact[start : i + 1]
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return compact[start : i + 1]
        elif depth == 0 and ch == ",":
            return compact[start:i]
    return compact[start:]
