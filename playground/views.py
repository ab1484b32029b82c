"""Playground pages and their JSON endpoints. Views parse, call compose/execute/config, render.

Roles: any member sees the page; sending (which spends money) needs reviewer; provider keys,
models and prices need owner. Executions and runs of other workspaces answer 404.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from accounts import ratelimit
from playground import actions, config, execute, operations, presenters, prompt_versions, restore
from playground import compose as c
from playground.models import (
    Execution,
    ModelEntry,
    ProviderConfig,
    ProviderKind,
    SavedPrompt,
    WorkspacePlayground,
)
from runs.actions import ActionError, budgets
from runs.actions.permissions import ROLE_SCOPES, Action
from runs.actions.prompts import do_save_prompt_version
from runs.models import Event
from runs.protocol.canonical import parse_json
from runs.protocol.errors import ProtocolError
from runs.providers import egress
from runs.selectors.prompts import find_version, get_prompt, prompts_of
from runs.web.request import (
    actor_for,
    current_membership,
    current_workspace,
    get_run_for_user,
    may,
    require_action,
)
from runs.web.wire import WireJsonResponse

MAX_BODY_NOTE = "The request is too large."


def _json_body(request: HttpRequest) -> dict:
    # The protocol's parser: besides text that is not JSON it refuses what could be neither
    # stored nor sent on (NaN/Infinity, lone surrogates such as \ud800, thousands of levels).
    try:
        data = parse_json(request.body or b"{}")
    except ProtocolError as exc:
        raise c.ComposeError("body", f"the request body is not usable JSON: {exc.message}") from None
    if not isinstance(data, dict):
        raise c.ComposeError("body", "the request body must be a JSON object")
    return data


def _error(field: str, message: str, status: int = 400, code: str = "INVALID_INPUT") -> WireJsonResponse:
    return WireJsonResponse({"error": {"field": field, "message": message, "code": code}}, status=status)


def _model_pk(value: Any) -> int | None:
    if value in (None, ""):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise c.ComposeError("model", "unknown model") from None


def _schema(op: str) -> dict | None:
    operation = operations.get(op)
    return operation.schema if operation.structured else None


def _compose_for(session: c.Session, entry: ModelEntry) -> c.Composition:
    return c.compose(session, entry.spec(), _schema(session.operation_type))


def _context(request: HttpRequest, **extra: Any) -> dict:
    workspace = current_workspace(request)
    choices = config.model_choices(workspace)
    default = config.default_model(workspace)
    ctx = {
        "nav_active": "playground",
        "workspace": workspace,
        "models": choices,
        "default_model": default.pk if default else None,
        "setup_problem": config.setup_problem(workspace),
        "operations": list(operations.OPERATIONS.values()),
        "can_send": may(request, Action.PLAYGROUND_SEND),
        "is_owner": may(request, Action.MANAGE_PROVIDERS),
        "saved_prompts": list(prompts_of(workspace)[:200]),
    }
    ctx.update(extra)
    return ctx


# --------------------------------------------------------------------------------------------
# The page


@login_required
@require_GET
def playground(request: HttpRequest) -> HttpResponse:
    workspace = current_workspace(request)
    initial: dict[str, Any] = {"session": c.session_to_json(c.Session()), "model": None, "origin": None}
    saved_id = request.GET.get("prompt")
    if saved_id:
        # A saved prompt's id is a small positive integer; anything else names no prompt (404).
        saved = get_object_or_404(SavedPrompt, pk=actions.parse_pk(saved_id) or 0, workspace=workspace)
        initial["session"] = _saved_session(saved)
        initial["model"] = saved.model_id
        initial["saved_prompt"] = {"id": saved.pk, "name": saved.name}
    prompt_name = request.GET.get("prompt_name")
    if prompt_name:
        initial.update(
            _open_version(workspace, prompt_name, request.GET.get("version"), request.GET.get("label"))
        )
    from_event = request.GET.get("from_event")
    if from_event:
        initial.update(_restore_from_event(request, from_event))
    elif initial["model"] is None:
        remembered = config.remembered_model(workspace, request.user)
        initial["model"] = remembered.pk if remembered else None
        initial["model_source"] = "remembered" if remembered else "default"
    initial["levels"] = config.levels(workspace, request.user)
    return render(request, "playground/playground.html", _context(request, initial=initial))


def _open_version(workspace, name: str, version: str | None, label: str | None) -> dict:
    """A prompt version opened in the page (404 for a missing one, or another workspace's)."""
    number = int(version) if version and version.isdigit() and len(version) < 10 else None
    if version and number is None:
        raise Http404("version is a number")
    found = find_version(
        workspace, name[:200], version=number, label=None if number else (label or "latest")[:40]
    )
    if found is None:
        raise Http404("no such prompt version")
    session, model = prompt_versions.session_of(found)
    return {
        "session": session,
        "model": model,
        "saved_prompt": {"name": found.prompt.name, "version": found.number},
    }


def _saved_session(saved: SavedPrompt) -> dict:
    data = dict(saved.options or {})
    data.update(
        {"system_prompt": saved.system_prompt, "prompt": saved.prompt, "operation_type": saved.operation_type}
    )
    return c.session_to_json(c.session_from_json(data))


def _restore_from_event(request: HttpRequest, ref: str) -> dict:
    """``<run_id>:<seq>`` of a model_io event -> the exact request as a session, plus the
    original response (matched by correlation id) to show beside the re-run."""
    run_id, _, seq_text = ref.rpartition(":")
    if not run_id or not seq_text.isdigit():
        raise Http404("from_event is <run_id>:<seq>")
    run = get_run_for_user(request, run_id)
    event = Event.objects.filter(run=run, seq=int(seq_text), type="model_io").first()
    if event is None:
        raise Http404("no model call at that sequence number")
    data = event.data
    correlation = data.get("correlationId")
    request_body = data.get("payload") if data.get("direction") == "request" else None
    response = data if data.get("direction") == "response" else None
    if correlation:
        related = Event.objects.filter(run=run, type="model_io", correlation_id=correlation).order_by("seq")
        for other in related:
            body = other.data
            if request_body is None and body.get("direction") == "request":
                request_body = body.get("payload")
            if response is None and body.get("direction") == "response":
                response = body
    origin: dict[str, Any] = {
        "run_id": run.run_id,
        "seq": event.seq,
        "provider": data.get("provider"),
        "model": data.get("model"),
    }
    if response is not None:
        origin["response"] = {
            "summary": response.get("summary"),
            "usage": response.get("usage"),
            "cost": response.get("cost"),
            "text": presenters.response_text(response.get("payload")),
        }
    if not isinstance(request_body, dict) or not isinstance(request_body.get("messages"), list):
        origin["problem"] = "This model call did not record its request payload, so it cannot be restored."
        return {"origin": origin}
    provider = data.get("provider") or ""
    is_openai = provider == "openai" or any(m.get("role") == "system" for m in request_body["messages"])
    try:
        if is_openai:
            session, extra = c.session_from_openai_request(request_body)
        else:
            session, extra = c.session_from_anthropic_request(request_body)
    except (c.ComposeError, KeyError, TypeError, ValueError) as exc:
        origin["problem"] = f"The recorded request cannot be restored: {exc}"
        return {"origin": origin}
    origin["request"] = request_body
    kind = "openai" if is_openai else "anthropic"
    recorded_model = str(extra.get("model") or data.get("model") or "")
    restoration = _restoration(current_workspace(request), session, kind, recorded_model, request_body)
    origin["restore"] = restoration.as_json()
    if restoration.status != restore.EXACT:
        origin["model_notice"] = restoration.message
    model = restoration.model_pk
    return {"session": c.session_to_json(session), "model": model, "origin": origin}


def _restoration(
    workspace, session: c.Session, kind: str, recorded_model: str, recorded: dict
) -> restore.Restoration:
    """The recorded provider and model when configured, else a plainly named substitute; "exact"
    only when the session recomposes to the recorded request for that model."""
    entries = {m.pk: m for m in config.available_models(workspace)}
    candidates = [
        restore.Candidate(
            pk=m.pk, kind=m.provider.kind, model_id=m.model_id, label=m.display_name, usable=config.usable(m)
        )
        for m in entries.values()
    ]
    default = config.default_model(workspace, list(entries.values()))
    chosen, status = restore.choose_model(
        kind=kind, model_id=recorded_model, candidates=candidates, default_pk=default.pk if default else None
    )
    recomposed = None
    if chosen is not None and status == restore.EXACT:
        try:
            recomposed = _compose_for(session, entries[chosen.pk]).request
        except c.ComposeError:
            recomposed = None
    return restore.describe(
        kind=kind,
        model_id=recorded_model,
        chosen=chosen,
        status=status,
        recorded=recorded,
        recomposed=recomposed,
        unusable=restore.listed_but_unusable(kind=kind, model_id=recorded_model, candidates=candidates),
    )


# --------------------------------------------------------------------------------------------
# JSON endpoints


@login_required
@require_POST
def preview(request: HttpRequest) -> WireJsonResponse:
    """Apply one change (with its smart behaviours) and show the exact request it would send."""
    workspace = current_workspace(request)
    try:
        data = _json_body(request)
        session = c.session_from_json(data.get("session") or {})
        change = data.get("change")
        if isinstance(change, dict) and change.get("name"):
            if change["name"] in ("after_send", "adopt_partial"):
                adopt = change["name"] == "adopt_partial"
                session = _after_send(workspace, session, change.get("value"), adopt=adopt)
            else:
                session = c.apply_change(session, str(change["name"]), change.get("value"))
        out: dict[str, Any] = {"session": c.session_to_json(session)}
        try:
            entry = config.resolve_model(workspace, _model_pk(data.get("model")))
        except config.NoProvider as exc:
            out["problem"] = exc.message
            return WireJsonResponse(out)
        out["model"] = {"pk": entry.pk, "kind": entry.provider.kind, "context_window": entry.context_window}
        if not session.prompt.strip() and not c.pending_tool_uses(session.history):
            session = replace(session, prompt="…")  # preview the shape before a prompt is written
        try:
            comp = _compose_for(session, entry)
        except c.ComposeError as exc:
            out["compose_error"] = {"field": exc.field, "message": exc.message}
            return WireJsonResponse(out)
        out.update({"request": comp.request, "notes": list(comp.notes), "flags": comp.flags})
        return WireJsonResponse(out)
    except c.ComposeError as exc:
        return _error(exc.field, exc.message)


def _after_send(workspace, session: c.Session, execution_id: Any, *, adopt: bool = False) -> c.Session:
    """The session once ``execution_id``'s answer joins the history: a completed answer does; an
    incomplete one (a cut stream) only when the tester adopts it (``adopt``)."""
    try:
        ex = Execution.objects.for_workspace(workspace).get(pk=uuid.UUID(str(execution_id)))
    except (ValueError, Execution.DoesNotExist):
        raise c.ComposeError("execution", "unknown execution") from None
    adoptable = adopt and ex.status == "incomplete" and bool(ex.response_text)
    if ex.status != "completed" and not adoptable:  # nothing joins; the toggles stay for another try
        return session
    comp = c.Composition(
        provider=ex.provider_kind,
        request={},
        user_content=ex.user_content_json,
        notes=(),
        flags=ex.flags,
        cache_keys=tuple(ex.cache_keys),
    )
    return c.after_send(session, comp, ex.content_json)


@login_required
@require_POST
def send(request: HttpRequest) -> WireJsonResponse:
    """Compose and store the execution(s); the provider call runs off the request path."""
    workspace = current_workspace(request)
    if not may(request, Action.PLAYGROUND_SEND):
        return _error("role", "sending needs the reviewer role in this workspace", status=403)
    try:
        data = _json_body(request)
        session = c.session_from_json(data.get("session") or {})
        columns = _compare_columns(data)
        targets = [(_model_pk(data.get("model")), session, "")]
        for i, column in enumerate(columns):
            label = str(column.get("label") or chr(ord("B") + i))[:8]
            targets.append((_model_pk(column.get("model")), c.with_overrides(session, column), label))
        entries = []
        for pk, _, _ in targets:
            try:
                entries.append(config.resolve_model(workspace, pk))
            except config.NoProvider as exc:
                return _error("model", exc.message, status=409, code="NO_PROVIDER")
        for entry in entries:
            problem = entry.provider.missing()
            if problem:
                return _error("model", problem, status=409, code="NO_PROVIDER")
            try:
                entry.provider.check_destination()  # checked again when the call connects
            except egress.EgressRefused as exc:
                return _error("model", exc.message, status=409, code=exc.code)
        compositions = [
            _compose_for(column_session, entry)
            for (_, column_session, _), entry in zip(targets, entries, strict=True)
        ]
        opened = [
            prompt_versions.opened_ref(workspace, data.get("prompt_version"), column_session)
            for _, column_session, _ in targets
        ]
        conversation_id, parent_run_id = _conversation(workspace, session, data.get("conversation"))
    except c.ComposeError as exc:
        return _error(exc.field, exc.message)
    limited = _spend_send_budget(workspace, len(entries))
    if limited is not None:
        return limited
    try:  # past the workspace's monthly cap: refused in words, recorded, no provider called
        budgets.refuse_past_cap(workspace, what="this playground send", actor=actor_for(request))
    except ActionError as exc:
        return _error("budget", exc.message, status=402, code=exc.code)
    group = uuid.uuid4().hex if len(entries) > 1 else ""
    config.remember_model(workspace, request.user, entries[0])
    with transaction.atomic():
        executions = [
            execute.submit(
                workspace=workspace,
                user=request.user,
                entry=entry,
                composition=comp,
                compare_group=group,
                label=f"{label or 'A'} · {entry.display_name}"[:40] if group else "",
                conversation_id=conversation_id,
                parent_run_id=parent_run_id,
                prompt=ref,
            )
            for (_, _, label), entry, comp, ref in zip(targets, entries, compositions, opened, strict=True)
        ]
    return WireJsonResponse(
        {
            "executions": [
                {
                    **presenters.execution_state(ex),
                    "ws_url": f"/ws/playground/executions/{ex.pk}/",
                    "request": comp.request,
                    "notes": list(comp.notes),
                }
                for ex, comp in zip(executions, compositions, strict=True)
            ],
            "compare_group": group or None,
            # The first column's answer continues the conversation unless the user picks another.
            "joins_history": str(executions[0].pk),
            "conversation": conversation_id or None,
        },
        status=202,
    )


def _conversation(workspace, session: c.Session, data: Any) -> tuple[str, str]:
    """(conversation id, parent run id) of a send. Stateful sends belong to a conversation: the
    page's (``{id, parent}``: parent is the execution whose answer ends the history), or a new
    one. Stateless sends stand alone."""
    if session.mode != "stateful":
        return "", ""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise c.ComposeError("conversation", "conversation must be an object {id, parent}")
    conversation_id = data.get("id") or uuid.uuid4().hex
    if not isinstance(conversation_id, str) or not re.fullmatch(r"[0-9a-f]{32}", conversation_id):
        raise c.ComposeError("conversation", "a conversation id is 32 hexadecimal characters")
    parent_run_id = ""
    if data.get("parent") and session.history:
        try:
            parent = Execution.objects.for_workspace(workspace).get(pk=uuid.UUID(str(data["parent"])))
        except (ValueError, Execution.DoesNotExist):
            raise c.ComposeError("conversation", "unknown parent execution") from None
        parent_run_id = parent.run_id
    return conversation_id, parent_run_id


def _compare_columns(data: dict) -> list[dict]:
    """Extra columns of a compare send: ``compare`` (a list of column objects: model, label and
    any of prompt, system prompt, temperature, top P, top K, max tokens, thinking), or the older
    ``compare_model`` (the same settings on a second model)."""
    columns = data.get("compare")
    if columns is None:
        columns = [] if data.get("compare_model") in (None, "") else [{"model": data["compare_model"]}]
    if not isinstance(columns, list):
        raise c.ComposeError("compare", "compare must be a list of columns")
    if len(columns) + 1 > c.MAX_COMPARE_COLUMNS:
        raise c.ComposeError("compare", f"at most {c.MAX_COMPARE_COLUMNS} columns can be compared")
    for column in columns:
        if not isinstance(column, dict):
            raise c.ComposeError("compare", "each compare column must be an object")
    return columns


def _spend_send_budget(workspace, calls: int) -> WireJsonResponse | None:
    """Sends spend money: each workspace has PLAYGROUND_SEND_RATE_PER_MINUTE provider calls per
    sliding minute, shared by every process (the cache); None when these calls fit."""
    limit = int(getattr(settings, "PLAYGROUND_SEND_RATE_PER_MINUTE", 0))
    if limit <= 0:
        return None
    decision = ratelimit.hit(f"pg-send:ws{workspace.pk}", limit=limit, window=60, cost=calls)
    if decision.allowed:
        return None
    response = _error(
        "send",
        f"this workspace may make {limit} model calls per minute: try again in {decision.retry_after} s",
        status=429,
        code="RATE_LIMITED",
    )
    response["Retry-After"] = str(decision.retry_after)
    return response


def _get_execution(request: HttpRequest, execution_id: uuid.UUID) -> Execution:
    workspace = current_workspace(request)
    ex = Execution.objects.for_workspace(workspace).select_related("model").filter(pk=execution_id).first()
    if ex is None:
        raise Http404("no such execution")
    return ex


@login_required
@require_GET
def execution_detail(request: HttpRequest, execution_id: uuid.UUID) -> WireJsonResponse:
    ex = _get_execution(request, execution_id)
    return WireJsonResponse(presenters.state_with_context(ex))


@login_required
@require_POST
def execution_cancel(request: HttpRequest, execution_id: uuid.UUID) -> WireJsonResponse:
    """Stop: the provider call is dropped and the execution (and its run) end ``cancelled``."""
    ex = _get_execution(request, execution_id)
    if not may(request, Action.PLAYGROUND_SEND):
        return _error("role", "stopping a call needs the reviewer role in this workspace", status=403)
    stopped = execute.cancel(ex, actor=f"user:{request.user.get_username()}")
    if not stopped:
        ex.refresh_from_db()
    return WireJsonResponse({"stopped": stopped, **presenters.state_with_context(ex)})


@login_required
@require_POST
def execution_retry(request: HttpRequest, execution_id: uuid.UUID) -> WireJsonResponse:
    """Send a failed or stopped execution's exact request again, as a new execution."""
    workspace = current_workspace(request)
    ex = _get_execution(request, execution_id)
    if not may(request, Action.PLAYGROUND_SEND):
        return _error("role", "sending needs the reviewer role in this workspace", status=403)
    if ex.status not in ("failed", "cancelled", "incomplete"):
        return _error(
            "execution",
            f"only a failed, incomplete or stopped call can be retried (this one is {ex.status})",
            409,
        )
    entry = ex.model
    if entry is None or entry.pk not in {m.pk for m in config.available_models(workspace)}:
        return _error(
            "model", "the model of this call is no longer available: choose another and send again", 409
        )
    problem = entry.provider.missing()
    if problem:
        return _error("model", problem, status=409)
    with transaction.atomic():
        again = execute.resubmit(ex, user=request.user)
    return WireJsonResponse(
        {
            **presenters.execution_state(again),
            "ws_url": f"/ws/playground/executions/{again.pk}/",
            "retry_of": str(ex.pk),
        },
        status=202,
    )


@login_required
@require_GET
def execution_message(request: HttpRequest, execution_id: uuid.UUID) -> HttpResponse:
    """The assistant message as HTML (structured output rendered for people)."""
    ex = _get_execution(request, execution_id)
    return render(request, "playground/_assistant.html", presenters.message_context(ex))


# --------------------------------------------------------------------------------------------
# Saved prompts


@login_required
@require_POST
def save_prompt(request: HttpRequest) -> WireJsonResponse:
    """ "Save as new version": the session becomes the next immutable version of the named prompt."""
    workspace = current_workspace(request)
    membership = current_membership(request)
    if not may(request, Action.SAVE_PROMPT):
        return _error("role", "saving prompts needs the reviewer role", status=403)
    try:
        data = _json_body(request)
        session = c.session_from_json(data.get("session") or {})
        name = str(data.get("name") or "").strip()
        if not name:
            raise c.ComposeError("name", "give the prompt a name")
        model_pk = _model_pk(data.get("model"))
        body, kind = prompt_versions.body_and_type(session, get_prompt(workspace, name))
    except c.ComposeError as exc:
        return _error(exc.field, exc.message)
    model = ModelEntry.objects.visible_to(workspace).filter(pk=model_pk).first() if model_pk else None
    try:
        version = do_save_prompt_version(
            workspace,
            name=name,
            type=kind,
            body=body,
            config=prompt_versions.config_of(session, model),
            message=str(data.get("message") or "")[:500],
            scopes=ROLE_SCOPES.get(membership.role if membership else "", frozenset()),
            user=request.user,
        )
    except ActionError as exc:
        return _error(
            exc.path or "name", exc.message, status=409 if exc.code == "CONFLICT" else 400, code=exc.code
        )
    return WireJsonResponse(
        {
            "name": version.prompt.name,
            "version": version.number,
            "url": f"/playground/?{urlencode({'prompt_name': version.prompt.name, 'version': version.number})}",
            "page": reverse("runs:prompt_detail", args=[version.prompt.name]),
        }
    )


# --------------------------------------------------------------------------------------------
# Settings: providers, models, prices (owner only)


@login_required
def settings_page(request: HttpRequest) -> HttpResponse:
    workspace = current_workspace(request)
    status = 200
    if request.method == "POST":
        membership = require_action(request, Action.MANAGE_PROVIDERS)
        action = request.POST.get("action", "")
        try:
            _apply_settings(membership, action, request.POST)
        except actions.SettingsError as exc:
            messages.error(request, str(exc))
            status = 400
        else:
            messages.success(request, "Saved.")
            return redirect("playground:settings")
    elif request.method != "GET":
        return HttpResponse(status=405, headers={"Allow": "GET, POST"})
    prefs = WorkspacePlayground.objects.filter(workspace=workspace).first()
    providers = list(ProviderConfig.objects.visible_to(workspace).order_by("workspace_id", "name"))
    models = list(
        ModelEntry.objects.visible_to(workspace)
        .select_related("provider")
        .order_by("workspace_id", "position")
    )
    return render(
        request,
        "playground/settings.html",
        {
            "nav_active": "playground",
            "workspace": workspace,
            "providers": providers,
            "models": models,
            "kinds": ProviderKind.choices,
            "is_owner": may(request, Action.MANAGE_PROVIDERS),
            "default_model": prefs.default_model_id if prefs else None,
            "hidden_models": set(prefs.hidden_models.values_list("pk", flat=True)) if prefs else set(),
            "setup_problem": config.setup_problem(workspace),
            "operation_rows": _operation_rows(workspace),
        },
        status=status,
    )


def _operation_rows(workspace) -> list[dict]:
    """Each operation type with its effective defaults (settings page: seed-004 item 31)."""
    found = config.operation_defaults(workspace)
    return [{"op": op, "values": found.get(op.id, {})} for op in operations.OPERATIONS.values()]


def _model_form(post) -> dict:
    """The fields of the add-model and edit-model forms, as the actions take them."""
    return {
        "model_id": post.get("model_id", ""),
        "display_name": post.get("display_name", ""),
        "context_window": post.get("context_window", ""),
        "supports_thinking": post.get("supports_thinking") == "on",
        "supports_citations": post.get("supports_citations") == "on",
        "supports_pdf": post.get("supports_pdf") == "on",
        "max_tokens_param": post.get("max_tokens_param", ""),
    }


def _apply_settings(membership, action: str, post) -> None:
    if action == "add_provider":
        actions.do_add_provider(
            membership=membership,
            name=post.get("name", ""),
            kind=post.get("kind", ""),
            base_url=post.get("base_url", ""),
            api_key=post.get("api_key", ""),
            key_required=post.get("key_required") == "on",
            api_key_env=(post.get("api_key_env") or "").strip(),
        )
    elif action == "set_key":
        actions.do_set_provider_key(
            membership=membership, provider_pk=post.get("provider"), api_key=post.get("api_key", "")
        )
    elif action == "limits":
        actions.do_set_provider_limits(
            membership=membership,
            provider_pk=post.get("provider"),
            timeout_seconds=post.get("timeout_seconds", ""),
            max_retries=post.get("max_retries", ""),
        )
    elif action == "add_model":
        actions.do_add_model(
            membership=membership,
            provider_pk=post.get("provider"),
            **_model_form(post),
        )
    elif action == "prices":
        rows: dict[int, dict[str, str]] = {}
        for key in post:
            match = _PRICE_FIELD.fullmatch(key)
            if match:
                pk = actions.parse_pk(match["pk"])
                if pk is not None:
                    rows.setdefault(pk, {})[match["field"]] = post.get(key, "")
        rows = {pk: row for pk, row in rows.items() if "input" in row}  # rows the form showed
        actions.do_set_prices(membership=membership, prices=rows)
    elif action == "default_model":
        actions.do_set_default_model(membership=membership, model_pk=post.get("model"))
    elif action == "operation_defaults":
        actions.do_set_operation_defaults(
            membership=membership,
            operation_type=post.get("operation_type", ""),
            temperature=post.get("temperature", ""),
            thinking=post.get("thinking", ""),
            citations=post.get("citations", ""),
        )
    elif action == "edit_provider":
        actions.do_edit_provider(
            membership=membership,
            provider_pk=post.get("provider"),
            name=post.get("name", ""),
            base_url=post.get("base_url", ""),
            key_required=post.get("key_required") == "on",
        )
    elif action in ("enable_provider", "disable_provider"):
        actions.do_set_provider_enabled(
            membership=membership, provider_pk=post.get("provider"), enabled=action == "enable_provider"
        )
    elif action == "delete_provider":
        actions.do_delete_provider(membership=membership, provider_pk=post.get("provider"))
    elif action == "edit_model":
        actions.do_edit_model(
            membership=membership,
            model_pk=post.get("model"),
            **_model_form(post),
        )
    elif action in ("enable_model", "disable_model"):
        actions.do_set_model_enabled(
            membership=membership, model_pk=post.get("model"), enabled=action == "enable_model"
        )
    elif action == "delete_model":
        actions.do_delete_model(membership=membership, model_pk=post.get("model"))
    else:
        raise actions.SettingsError("INVALID_INPUT", "unknown action")


_PRICE_FIELD = re.compile(
    r"m(?P<pk>[0-9]{1,18})_(?P<field>input|output|cache_read|cache_write_1h|cache_write|currency)"
)
