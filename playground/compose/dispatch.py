"""The composer for a model's provider kind."""

from __future__ import annotations

from playground.compose.anthropic import compose_anthropic
from playground.compose.openai import compose_openai
from playground.compose.session import ComposeError, Composition, ModelSpec, Session


def compose(session: Session, model: ModelSpec, schema: dict | None = None) -> Composition:
    if model.provider == "anthropic":
        return compose_anthropic(session, model, schema)
    if model.provider == "openai":
        return compose_openai(session, model, schema)
    raise ComposeError("model", f"unknown provider kind {model.provider!r}")
