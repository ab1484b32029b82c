"""The prompt version the current context compiled last (``Prompt.compile`` sets it): the traced
clients record it with each model call (``"workbench.prompt": {"name", "version"}`` in the
response payload), so the server's runs list filters by ``name@version`` and its ledger breaks
cost down by it. Nothing here imports the rest of the SDK."""

from __future__ import annotations

from contextvars import ContextVar
from typing import TypedDict


class PromptRef(TypedDict):
    name: str
    version: int


PAYLOAD_KEY = "workbench.prompt"

active_prompt: ContextVar[PromptRef | None] = ContextVar("workbench_active_prompt", default=None)
