"""A queue review's annotation (JSON a tool reads back) is shown in words; other text as written."""

from __future__ import annotations

import json

from runs.presenters.review_text import review_words
from runs.presenters.timeline import summarize

REVIEW = {
    "type": "review.completed",
    "queue": "Tone <check>",
    "queueId": "q_1",
    "item": {"kind": "run", "seq": None, "stepId": None},
    "reviewer": "bob",
    "scores": [
        {"name": "helpful", "dataType": "BOOLEAN", "value": 0.0, "stringValue": "False"},
        {"name": "stars", "dataType": "NUMERIC", "value": 4.5, "stringValue": None},
        {"name": "label", "dataType": "CATEGORICAL", "value": 2.0, "stringValue": "polite"},
    ],
    "comment": "Reads well.",
}


def test_a_review_annotation_in_words():
    text = json.dumps(REVIEW, sort_keys=True, separators=(",", ":"))
    said = review_words(text)
    assert said == "Review in “Tone <check>” by bob: helpful no; stars 4.5; label “polite”. “Reads well.”"
    assert summarize({"type": "annotation", "text": text}) == f"note: {said}"


def test_other_text_is_not_a_review():
    for text in ("plain words", '{"type": "other"}', "{not json review.completed", None, 3):
        assert review_words(text) is None
    assert (
        review_words(json.dumps({**REVIEW, "scores": "x", "comment": None}))
        == "Review in “Tone <check>” by bob."
    )
