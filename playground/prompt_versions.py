"""The playground's session as a prompt version and back (runs.models.PromptVersion).

A session with a system prompt saves as a chat prompt (system, then user message); one without as
a text prompt; a prompt keeps the type of its first save. The model, the operation type and the
toggles and advanced settings are the version's config (``model``, ``provider``, ``model_entry``,
``operation_type``, ``params``): they version with the body.

A send from a page that opened a version names it (``prompt_version``); while the text is still
that version's, the execution records ``{"name", "version"}`` (its flags' ``prompt``) and its run's
model call carries it like the SDK's calls do (``workbench.prompt``): the runs list filters by it
and the prompt page breaks cost down by it. Edited text is no longer that version: not recorded.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from playground import compose as c
from playground.models import ModelEntry
from runs.models import Prompt, PromptType, PromptVersion, Workspace
from runs.selectors.prompts import find_version

SESSION_ONLY = ("prompt", "system_prompt", "operation_type", "history", "file", "tool_results", "cached")


def body_and_type(session: c.Session, existing: Prompt | None) -> tuple[Any, str]:
    kind = existing.type if existing else (PromptType.CHAT if session.system_prompt else PromptType.TEXT)
    if kind == PromptType.TEXT:
        if session.system_prompt:
            raise c.ComposeError(
                "system_prompt",
                f"{existing.name if existing else 'this'} is a text prompt: it has no system prompt",
            )
        return session.prompt, kind
    messages = [{"role": "system", "content": session.system_prompt}] if session.system_prompt else []
    messages.append({"role": "user", "content": session.prompt})
    return messages, kind


def config_of(session: c.Session, model: ModelEntry | None) -> dict[str, Any]:
    params = c.session_to_json(
        replace(session, history=(), document=None, tool_results={}, cached=frozenset(), prompt="")
    )
    for key in SESSION_ONLY:
        params.pop(key, None)
    config: dict[str, Any] = {"operation_type": session.operation_type, "params": params}
    if model is not None:
        config.update({"model": model.model_id, "provider": model.provider.kind, "model_entry": model.pk})
    return config


def session_of(version: PromptVersion) -> tuple[dict, int | None]:
    """(session JSON, model entry pk or None) for the page to open."""
    config = version.config_json
    data = dict(config.get("params") or {}) if isinstance(config.get("params"), dict) else {}
    body = version.body_json
    system, prompt = "", ""
    if isinstance(body, str):
        prompt = body
    elif isinstance(body, list):
        for message in body:
            if message.get("role") == "system" and not system:
                system = message.get("content", "")
            elif message.get("role") == "user":
                prompt = message.get("content", "")
    data.update(
        {
            "system_prompt": system,
            "prompt": prompt,
            "operation_type": config.get("operation_type") or "generic",
        }
    )
    try:
        session = c.session_from_json(data)
    except c.ComposeError:  # saved with settings this page no longer accepts: the text alone
        session = c.session_from_json({"system_prompt": system, "prompt": prompt})
    entry = config.get("model_entry")
    return c.session_to_json(session), entry if type(entry) is int else None


def opened_ref(workspace: Workspace, value: Any, session: c.Session) -> dict[str, Any] | None:
    """``{"name", "version"}`` of the opened version when ``session``'s text is still that version's
    body; None when nothing was opened or the text was edited. A malformed value or a version the
    workspace does not have is refused (ComposeError at ``prompt_version``)."""
    if value is None:
        return None
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("name"), str)
        or type(value.get("version")) is not int
    ):
        raise c.ComposeError("prompt_version", 'prompt_version is {"name": ..., "version": N}')
    found = find_version(workspace, value["name"][:200], version=value["version"])
    if found is None:
        raise c.ComposeError("prompt_version", "no such prompt version in this workspace")
    try:
        body, _ = body_and_type(session, found.prompt)
    except c.ComposeError:  # a system prompt added to a text prompt: another prompt now
        return None
    if body != found.body_json:
        return None
    return {"name": found.prompt.name, "version": found.number}
