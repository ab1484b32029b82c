"""Prompt versions in step code: ``session.prompt(name)`` and the reference a model call records.

A program asks its session for a prompt by name (the ``production`` label by default); a model
call made with it (``session.model_call(..., prompt=p)``) records ``"workbench.prompt": {"name",
"version"}`` in its response payload, the same reference the host SDK records, so the runs list
filters by ``name@version`` and the prompt page breaks cost down by version.

An experiment whose change is "prompt X version N" (evals) forks each item's source run with
``configurable[PROMPT_OVERLAY] = {X: {version, type, body, config}}``: in that fork
``session.prompt(X)`` answers version N, whatever the labels say.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runs.models import Workspace
from runs.presenters.prompts import compile_body
from runs.selectors.prompts import PROMPT_KEY, find_version

PROMPT_OVERLAY = "workbench.prompts"  # configurable key: prompt name -> the version a fork uses


@dataclass(frozen=True)
class ProgramPrompt:
    name: str
    version: int
    type: str
    body: Any
    config: dict[str, Any] = field(default_factory=dict)

    def compile(self, **values: Any) -> Any:
        """The body with ``{{name}}`` filled in (a str, or a list of ``{role, content}`` messages)."""
        return compile_body(self.body, values)

    def ref(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}

    def overlay(self) -> dict[str, Any]:
        """What a fork's ``configurable[PROMPT_OVERLAY][name]`` holds for this version."""
        return {"version": self.version, "type": self.type, "body": self.body, "config": self.config}


def from_overlay(name: str, doc: Any) -> ProgramPrompt | None:
    if not isinstance(doc, dict) or type(doc.get("version")) is not int:
        return None
    config = doc.get("config")
    config = config if isinstance(config, dict) else {}
    return ProgramPrompt(name, doc["version"], str(doc.get("type") or "text"), doc.get("body"), config)


def resolve(
    workspace: Workspace,
    configurable: dict[str, Any],
    name: str,
    *,
    label: str | None = None,
    version: int | None = None,
) -> ProgramPrompt | None:
    """The version a fork's overlay names for ``name``, else the workspace's by label or number
    (``production`` when neither is given); None when there is none."""
    overlaid = configurable.get(PROMPT_OVERLAY)
    if isinstance(overlaid, dict) and name in overlaid:
        found = from_overlay(name, overlaid[name])
        if found is not None:
            return found
    row = find_version(workspace, name, label=label, version=version)
    if row is None:
        return None
    return ProgramPrompt(name, row.number, row.prompt.type, row.body_json, row.config_json)


def stamp(response: dict[str, Any], prompt: ProgramPrompt | None) -> dict[str, Any]:
    """A model_io response's fields with the prompt reference in its payload."""
    if prompt is None:
        return response
    payload = response.get("payload")
    payload = dict(payload) if isinstance(payload, dict) else {}
    return {**response, "payload": {**payload, PROMPT_KEY: prompt.ref()}}
