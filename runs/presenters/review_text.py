"""A queue review's annotation in words.

A completed review in an annotation queue appends an annotation whose text is JSON a tool can read
back (``{"type": "review.completed", "queue": ..., "reviewer": ..., "scores": [...], ...}``,
review.actions.annotation_text). Pages show it as a sentence instead:

    Review in “Tone check” by bob: helpful yes; stars 4; label “polite”. “Reads well.”

Any other text is not a review (None): the page shows it as it was written."""

from __future__ import annotations

import json
from typing import Any

from runs.presenters import numbers

REVIEW_TYPE = "review.completed"
MAX_SCORES = 20


def _score(score: Any) -> str:
    if not isinstance(score, dict):
        return ""
    name = str(score.get("name") or "score")
    kind = score.get("dataType")
    value = score.get("value")
    if kind == "BOOLEAN":
        return f"{name} {'yes' if value else 'no'}"
    if kind == "CATEGORICAL" or isinstance(score.get("stringValue"), str):
        return f"{name} “{score.get('stringValue') or numbers.plain(value)}”"
    return f"{name} {numbers.plain(value) or 'none'}"


def review_words(text: object) -> str | None:
    """``text`` in words when it is a queue review's annotation, else None."""
    if not isinstance(text, str) or not text.startswith("{") or REVIEW_TYPE not in text:
        return None
    try:
        body = json.loads(text)
    except ValueError:
        return None
    if not isinstance(body, dict) or body.get("type") != REVIEW_TYPE:
        return None
    found = body.get("scores")
    scores: list[Any] = found if isinstance(found, list) else []
    said = "; ".join(s for s in (_score(x) for x in scores[:MAX_SCORES]) if s)
    out = f"Review in “{body.get('queue') or 'a queue'}” by {body.get('reviewer') or 'someone'}"
    out += f": {said}." if said else "."
    comment = body.get("comment")
    if isinstance(comment, str) and comment.strip():
        out += f" “{comment.strip()}”"
    return out
