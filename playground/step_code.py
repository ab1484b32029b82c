"""Playground executions as step code (``runs.engine.programs``): the replay worker re-executes them.

A playground run (workflow ``playground``) names its execution in
``run.metadata["playground"]["executionId"]``; the execution keeps the request exactly as it
was composed. :func:`playground_program` records what the playground's own recorder records
(``step_started``, the ``model_io`` request, its stream chunks and response, a ``tool_call``
per tool the model called, the ``answer`` artifact, the end), but makes the call through the
provider layer (``runs.execution.model_calls``) inside a fork session:

* replay: the execution's request is sent again, so the source's answer comes from the
  response cache (no provider request), its stream chunks too; the events equal the source's
  and the determinism score is 1.0. If the request is no longer the one recorded (the
  execution's composed request was changed, or the adapter now puts another body on the
  wire), it goes to the provider and the replay diverges at the request.
* branch: ``runOptionsOverlay.configurable`` may change the call (:data:`CONFIGURABLE`):
  ``model`` (a model id of the workspace's catalogue, of either provider kind),
  ``prompt`` (the new user message) and ``systemPrompt``. The request is then composed again
  from the recorded one (``compose.session_from_*_request`` + ``compose.compose``), as the
  playground composes a send, and goes to the provider.

A fork whose execution was deleted is refused (``REPLAY_DATA_EXPIRED``, 410); a branch with an
unknown ``configurable`` key or a model the workspace does not offer is ``INVALID_INPUT``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings as django_settings

from playground import compose, execute, operations
from playground.config import available_models
from playground.keys import KeyUnreadable
from playground.models import Execution, ModelEntry
from runs.actions import ActionError, responsecache
from runs.engine import programs
from runs.execution import model_calls as cached
from runs.execution.replay import ReplayError
from runs.providers import egress
from runs.providers.base import ProviderError, ProviderSettings
from runs.selectors.runs import start_doc

CONFIGURABLE = ("model", "prompt", "systemPrompt")
EXECUTION_GONE = "REPLAY_DATA_EXPIRED"


class PlanError(Exception):
    def __init__(self, code: str, message: str, path: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.path = path


@dataclass
class PlannedCall:
    provider: ProviderSettings
    problem: str | None  # why the provider cannot be asked (None: it can)
    request: dict
    summary: str | None
    operation_type: str
    output_tool: str


def execution_of(workspace: Any, run_doc: dict) -> Execution:
    """The execution a playground run (or a fork of one) records; PlanError when it is gone."""
    metadata = run_doc.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    execution_id = (metadata.get("playground") or {}).get("executionId")
    execution = None
    if isinstance(execution_id, str):
        try:
            execution = (
                Execution.objects.for_workspace(workspace)
                .select_related("model__provider")
                .filter(pk=uuid.UUID(execution_id))
                .first()
            )
        except ValueError:
            execution = None
    if execution is None:
        raise PlanError(
            EXECUTION_GONE,
            f"the playground execution {execution_id!r} this run records was deleted: "
            "its composed request is needed to execute it again",
        )
    return execution


def _provider(kind: str, entry: ModelEntry | None) -> tuple[ProviderSettings, str | None]:

    allow = egress.settings_allowance(django_settings, operator=False)  # no provider row to vouch
    if entry is None:
        missing = ProviderSettings(kind=kind, egress_allow=allow)
        return missing, "the model of this execution was removed from the catalogue"
    try:
        return entry.provider.provider_settings(), entry.provider.missing()
    except KeyUnreadable as exc:
        return ProviderSettings(kind=entry.provider.kind, egress_allow=allow), str(exc)


def _check_configurable(configurable: Any) -> dict:
    if not isinstance(configurable, dict):
        raise PlanError("INVALID_INPUT", "configurable must be an object", "runOptionsOverlay.configurable")
    unknown = set(configurable) - set(CONFIGURABLE)
    if unknown:
        raise PlanError(
            "INVALID_INPUT",
            f"a playground run takes configurable {', '.join(CONFIGURABLE)}; not {', '.join(sorted(unknown))}",
            "runOptionsOverlay.configurable",
        )
    for key, value in configurable.items():
        if not isinstance(value, str) or (key == "model" and not value):
            raise PlanError(
                "INVALID_INPUT",
                f"configurable.{key} must be a string",
                f"runOptionsOverlay.configurable.{key}",
            )
    return configurable


def plan(workspace: Any, execution: Execution, configurable: dict | None) -> PlannedCall:
    """The call a (re-)execution makes: the recorded one, or one composed again for a branch."""

    configurable = _check_configurable(configurable or {})
    entry = execution.model
    request = execution.request_json
    user_content = execution.user_content_json
    operation_type = execution.operation_type
    output_tool = execution.output_tool
    if configurable:
        if "model" in configurable:
            entry = next(
                (m for m in available_models(workspace) if m.model_id == configurable["model"]), None
            )
            if entry is None:
                raise PlanError(
                    "INVALID_INPUT",
                    f"no model {configurable['model']!r} in this workspace's playground catalogue",
                    "runOptionsOverlay.configurable.model",
                )
        restore = (
            compose.session_from_anthropic_request
            if execution.provider_kind == "anthropic"
            else compose.session_from_openai_request
        )
        try:
            session, _ = restore(request)
            changes: dict[str, Any] = {}
            if "prompt" in configurable:
                changes["prompt"] = configurable["prompt"]
            if "systemPrompt" in configurable:
                changes["system_prompt"] = configurable["systemPrompt"]
                changes["send_system_prompt"] = bool(configurable["systemPrompt"])
            session = replace(session, **changes)
            spec = (
                entry.spec()
                if entry is not None
                else compose.ModelSpec(provider=execution.provider_kind, model=execution.model_name)
            )
            op = operations.get(session.operation_type)
            composition = compose.compose(
                session, spec, op.schema if session.operation_type != "generic" else None
            )
        except compose.ComposeError as exc:
            raise PlanError("INVALID_INPUT", f"{exc.field}: {exc}", "runOptionsOverlay.configurable") from exc
        request, user_content = composition.request, composition.user_content
        operation_type, output_tool = session.operation_type, composition.output_tool or ""
    kind = entry.kind if entry is not None else execution.provider_kind
    provider, problem = _provider(kind, entry)
    return PlannedCall(
        provider=provider,
        problem=problem,
        request=request,
        summary=execute.prompt_summary(user_content),
        operation_type=operation_type,
        output_tool=output_tool,
    )


def _answerable_from_cache(session: Any, call: PlannedCall) -> bool:

    if getattr(session, "mode", None) != "replay":
        return False
    recorded = cached.request_fields(call.provider, call.request)
    keys = responsecache.request_keys(call.provider.kind, recorded.get("model"), recorded["payload"])
    return keys is not None and responsecache.lookup(session.workspace, keys["v2"]) is not None


def playground_program(session: Any) -> None:
    """Execute a playground run's call again (a ``runs.execution.replay.ProgramSession``, usually a fork)."""

    workspace = session.workspace
    try:
        execution = execution_of(workspace, session.run.run_doc)
        call = plan(workspace, execution, session.configurable)
    except PlanError as exc:
        raise ReplayError(exc.code, exc.message) from exc
    session.begin_step(execute.STEP)
    if call.problem and not _answerable_from_cache(session, call):
        for command in execute.failure_commands("NO_PROVIDER", call.problem):
            session.execute(command)
        return
    correlation = f"corr_{uuid.uuid4().hex}"
    try:
        result = session.model_call(
            call.provider,
            call.request,
            step_id=execute.STEP,
            correlation_id=correlation,
            summary=call.summary,
            record_chunks=True,
        )
    except ProviderError as err:
        for command in execute.failure_commands(err.code, err.message):
            session.execute(command)
        return
    outcome = operations.check(call.operation_type, result, call.output_tool or None)
    for command in execute.completion_commands(
        result,
        outcome,
        operation_type=call.operation_type,
        output_tool=call.output_tool,
        correlation_id=correlation,
    ):
        session.execute(command)


def check_fork(*, workspace: Any, source: Any, mode: str, overlay: dict) -> None:
    """Refuse, before anything is written, a fork this program could not execute."""

    try:
        execution = execution_of(workspace, start_doc(source))
        if mode == "branch":
            plan(workspace, execution, overlay.get("configurable"))
    except PlanError as exc:
        raise ActionError(exc.code, exc.message, exc.path) from exc


playground_program.check_fork = check_fork  # type: ignore[attr-defined]
programs.register(execute.WORKFLOW["id"], playground_program)
