"""Operation types: what shape an answer must have, and checking it before anyone sees it.

The JSON Schemas live in the protocol's schema registry as ``playground.<operation>``; the
same ids are used as artifact ``typeId`` when an answer is recorded in a run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from playground.compose import OPERATION_TYPES
from runs.protocol.errors import ProtocolError
from runs.protocol.schemas import SchemaRegistry, default_registry
from runs.providers.base import ProviderResult


@dataclass(frozen=True)
class OperationType:
    id: str
    display_name: str
    description: str
    structured: bool
    guidance: str

    @property
    def type_id(self) -> str:
        return f"playground.{self.id}"

    @property
    def schema(self) -> dict | None:
        return registry().get(self.type_id)


OPERATIONS: dict[str, OperationType] = {
    op.id: op
    for op in (
        OperationType(
            "generic", "Generic", "Free-form text answer.", False, "Ask anything; the answer is plain text."
        ),
        OperationType(
            "validation",
            "True / False",
            "A yes/no decision with the reasoning behind it.",
            True,
            "Phrase the prompt as a statement or question that is either true or false.",
        ),
        OperationType(
            "extraction",
            "Extraction",
            "Named fields pulled out of the document, with a confidence.",
            True,
            "List the fields to extract (e.g. parties, dates, amounts).",
        ),
        OperationType(
            "rating",
            "Rating",
            "A numeric score with its rationale, strengths and improvements.",
            True,
            "Say what to rate and on which scale (e.g. 1 to 10).",
        ),
        OperationType(
            "classification",
            "Classification",
            "One category with a confidence, and the alternatives considered.",
            True,
            "Name the categories to choose from.",
        ),
        OperationType(
            "analysis",
            "Analysis",
            "A summary and structured findings with severity and evidence.",
            True,
            "Say what to analyse and what counts as a finding.",
        ),
    )
}
assert tuple(OPERATIONS) == OPERATION_TYPES


@lru_cache(maxsize=1)
def registry() -> SchemaRegistry:
    return default_registry()


def get(op: str) -> OperationType:
    return OPERATIONS[op]


@dataclass(frozen=True)
class Outcome:
    """The checked answer: ``value`` is schema-valid (for generic: ``{"text": ...}``) or None,
    in which case ``error`` says why and ``raw`` holds what the model produced."""

    value: dict | None
    error: str | None = None
    error_path: str | None = None
    raw: Any = None

    @property
    def ok(self) -> bool:
        return self.value is not None


def _candidate(result: ProviderResult, output_tool: str | None) -> tuple[Any, str | None]:
    if output_tool:
        for call in result.tool_calls:
            if call["name"] == output_tool:
                return call["input"], None
    text = result.text.strip()
    if text.startswith("```"):
        text = text.strip("`")
        text = text[text.find("\n") + 1 :] if "\n" in text else text
    if not text:
        return None, "the model gave no structured answer"
    try:
        return json.loads(text), None
    except ValueError:
        return result.text, "the answer is not JSON"


def check(op: str, result: ProviderResult, output_tool: str | None = None) -> Outcome:
    """Extract the structured answer of ``result`` and validate it against the operation's schema."""
    operation = get(op)
    if not operation.structured:
        value = {"text": result.text}
        registry().validate(operation.type_id, value)
        return Outcome(value=value, raw=result.text)
    candidate, problem = _candidate(result, output_tool)
    if problem:
        return Outcome(value=None, error=problem, raw=candidate)
    try:
        registry().validate(operation.type_id, candidate)
    except ProtocolError as exc:
        return Outcome(value=None, error=exc.message, error_path=exc.path, raw=candidate)
    return Outcome(value=candidate, raw=candidate)
