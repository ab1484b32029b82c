"""Error codes for people (pure): a stored or raised error is a sentence, with its code kept as a
small tag beside it, never ``SELF_APPROVAL: someone else ...`` as the message.

    split("NOT_EXECUTABLE: the workbench has no step code")
        -> ("NOT_EXECUTABLE", "The workbench has no step code.")
    sentence("someone else approves a promotion you asked for")
        -> "Someone else approves a promotion you asked for."
"""

from __future__ import annotations

import re

CODE = re.compile(r"^\s*\[?([A-Z][A-Z0-9_]{2,63})\]?(?: at [^:]{1,200})?\s*:\s*(.*)$", re.DOTALL)

# What a code means, for a code that comes without a message (or with a terse one).
MEANINGS = {
    "NOT_EXECUTABLE": "the workbench has no step code for this workflow (its host replays it)",
    "SOURCE_RUN_GONE": "the item's source run is gone",
    "SELF_APPROVAL": "someone other than the person who asked has to approve",
    "EXPERIMENT_FAILED": "the attached experiment failed on every item",
    "RATE_LIMITED": "the model provider refused the call (too many requests)",
    "FORBIDDEN": "your role does not allow this",
    "NOT_FOUND": "nothing with that id",
    "INVALID_INPUT": "the input is not valid",
}


def sentence(text: str) -> str:
    """A message as a sentence: capital first letter, a full stop at the end."""
    text = " ".join(str(text).split())
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


def split(error: object) -> tuple[str, str]:
    """``"CODE: message"`` (or ``"[CODE] message"``) -> (code, sentence); text without a code ->
    ("", sentence). A bare code gets its meaning from :data:`MEANINGS`."""
    text = "" if error is None else str(error).strip()
    if not text:
        return "", ""
    match = CODE.match(text)
    if match is None:
        bracket = re.match(r"^\[([A-Z][A-Z0-9_]{2,63})\]\s*(.*)$", text, re.DOTALL)
        if bracket is None:
            if re.fullmatch(r"[A-Z][A-Z0-9_]{2,63}", text):
                return text, sentence(MEANINGS.get(text, text.replace("_", " ").lower()))
            return "", sentence(text)
        code, rest = bracket.group(1), bracket.group(2)
    else:
        code, rest = match.group(1), match.group(2)
    return code, sentence(rest or MEANINGS.get(code, code.replace("_", " ").lower()))
