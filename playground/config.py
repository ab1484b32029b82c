"""Configuration hierarchy: global defaults -> workspace -> saved prompt -> the session's toggles.

``available_models`` and ``resolve_model`` answer which models a workspace can use and which one a
send goes to; ``setup_problem`` says exactly what is missing when nothing can answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from playground.models import (
    ModelEntry,
    OperationDefaults,
    ProviderConfig,
    SavedPrompt,
    UserPlayground,
    WorkspacePlayground,
)
from runs.models import Workspace


class NoProvider(Exception):
    """Nothing is configured that could answer: ``message`` says what to configure."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def available_models(workspace: Workspace) -> list[ModelEntry]:
    hidden: set[int] = set()
    prefs = WorkspacePlayground.objects.filter(workspace=workspace).first()
    if prefs is not None:
        hidden = set(prefs.hidden_models.values_list("pk", flat=True))
    entries = (
        ModelEntry.objects.visible_to(workspace)
        .filter(is_active=True, provider__is_enabled=True)
        .select_related("provider")
        .order_by("workspace_id", "position", "display_name")
    )
    # the workspace's own entries come first, then the global catalogue
    own = [m for m in entries if m.workspace_id is not None and m.pk not in hidden]
    shared = [m for m in entries if m.workspace_id is None and m.pk not in hidden]
    return own + shared


def usable(entry: ModelEntry) -> bool:
    return entry.provider.missing() is None


def default_model(workspace: Workspace, models: list[ModelEntry] | None = None) -> ModelEntry | None:
    models = available_models(workspace) if models is None else models
    if not models:
        return None
    prefs = WorkspacePlayground.objects.filter(workspace=workspace).select_related("default_model").first()
    candidates = []
    if prefs is not None and prefs.default_model_id:
        candidates.append(prefs.default_model_id)
    candidates += [m.pk for m in models if m.is_default and m.workspace_id is not None]
    candidates += [m.pk for m in models if m.is_default and m.workspace_id is None]
    by_pk = {m.pk: m for m in models}
    for pk in candidates:
        if pk in by_pk and usable(by_pk[pk]):
            return by_pk[pk]
    return next((m for m in models if usable(m)), models[0])


def remembered_model(workspace: Workspace, user) -> ModelEntry | None:
    """The model this user last sent to in this workspace, while it is still available."""
    if not getattr(user, "is_authenticated", False):
        return None
    prefs = UserPlayground.objects.filter(user=user, workspace=workspace).first()
    if prefs is None or prefs.last_model_id is None:
        return None
    return next((m for m in available_models(workspace) if m.pk == prefs.last_model_id), None)


def remember_model(workspace: Workspace, user, entry: ModelEntry) -> None:
    if getattr(user, "is_authenticated", False):
        UserPlayground.objects.update_or_create(
            user=user, workspace=workspace, defaults={"last_model": entry}
        )


def resolve_model(workspace: Workspace, model_pk: int | None, saved: SavedPrompt | None = None) -> ModelEntry:
    """The session's choice, else the saved prompt's, else the workspace/global default."""
    models = available_models(workspace)
    by_pk = {m.pk: m for m in models}
    for pk in (model_pk, saved.model_id if saved else None):
        if pk is not None:
            if pk not in by_pk:
                raise NoProvider("that model is not available in this workspace")
            return by_pk[pk]
    entry = default_model(workspace, models)
    if entry is None:
        raise NoProvider(setup_problem(workspace) or "no model is configured")
    return entry


def setup_problem(workspace: Workspace) -> str | None:
    """None when at least one model can answer; otherwise exactly what to configure."""
    models = available_models(workspace)
    if any(usable(m) for m in models):
        return None
    providers = list(ProviderConfig.objects.visible_to(workspace).filter(is_enabled=True))
    if not providers or not models:
        return (
            "No model is configured. Add a provider (Anthropic, OpenAI, or an OpenAI-compatible server "
            "such as Ollama, vLLM or llama.cpp by its base URL) and at least one model in Playground settings."
        )
    lines = sorted({p.missing() for p in providers if p.missing()})
    return "No provider can answer yet. " + " ".join(f"{line}." for line in lines)


def levels(workspace: Workspace, user) -> dict:
    """Where each configuration value comes from (global, workspace, saved prompt, session):
    per available model its provider's scope, key source and limits, plus the defaults of each
    level, for the page's "where settings come from" table."""
    models = available_models(workspace)
    prefs = WorkspacePlayground.objects.filter(workspace=workspace).first()
    workspace_default = prefs.default_model_id if prefs and prefs.default_model_id else None
    if workspace_default is None:
        workspace_default = next((m.pk for m in models if m.is_default and m.workspace_id), None)
    remembered = remembered_model(workspace, user)
    return {
        "operation_defaults": operation_defaults(workspace),
        "global_default": next((m.pk for m in models if m.is_default and m.workspace_id is None), None),
        "workspace_default": workspace_default,
        "effective_default": (default_model(workspace, models) or models[0]).pk if models else None,
        "remembered": remembered.pk if remembered else None,
        "models": {
            str(m.pk): {
                "label": m.display_name,
                "model_scope": "workspace" if m.workspace_id else "global",
                "provider": m.provider.name,
                "provider_scope": "workspace" if m.provider.workspace_id else "global",
                "key_source": m.provider.key_source,
                "timeout": m.provider.timeout_seconds,
                "retries": m.provider.max_retries,
                "priced": m.input_price is not None and m.output_price is not None,
            }
            for m in models
        },
    }


def operation_defaults(workspace: Workspace) -> dict[str, dict]:
    """Per operation type, its defaults and where each comes from: ``{op: {key: {value, scope}}}``
    (the workspace's value over the global one, key by key)."""
    out: dict[str, dict] = {}
    rows = OperationDefaults.objects.visible_to(workspace).order_by("-workspace_id")  # global first
    for row in sorted(rows, key=lambda r: r.workspace_id is not None):
        scope = "workspace" if row.workspace_id else "global"
        for key, value in row.values().items():
            out.setdefault(row.operation_type, {})[key] = {"value": value, "scope": scope}
    return out


@dataclass(frozen=True)
class ModelChoice:
    pk: int
    label: str
    provider: str
    kind: str
    usable: bool
    context_window: int | None
    supports_thinking: bool
    supports_citations: bool
    supports_pdf: bool


def model_choices(workspace: Workspace) -> list[ModelChoice]:
    return [
        ModelChoice(
            pk=m.pk,
            label=m.display_name,
            provider=m.provider.name,
            kind=m.provider.kind,
            usable=usable(m),
            context_window=m.context_window,
            supports_thinking=m.supports_thinking,
            supports_citations=m.supports_citations,
            supports_pdf=m.supports_pdf,
        )
        for m in available_models(workspace)
    ]
