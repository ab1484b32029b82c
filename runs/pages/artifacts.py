"""The artifact editor (form or JSON) and the version diff."""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import quote

import jsonpatch
import orjson
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from runs import actions
from runs.actions.permissions import Action
from runs.engine import commands as cmd
from runs.pages.access import RunAccess, run_page
from runs.pages.params import int_param, parse_json_field
from runs.presenters.timeline import diff_values
from runs.selectors.runs import (
    artifact_versions,
    artifact_versions_by_key,
    run_state,
)
from runs.web.artifact_forms import (
    attach_errors,
    build_form,
    fill_from_post,
    form_schema_errors,
    parse_form,
    schema_errors,
    schema_registry,
)
from runs.web.request import (
    actor_for,
    require_action,
)


def _engine_path_to_pointer(path: str) -> str:
    """``data.a[2].b`` (an engine error path) as the JSON pointer ``/a/2/b``."""
    if not path.startswith("data"):
        return "/"
    rest = path[len("data") :].replace("[", ".").replace("]", "")
    return "/" + "/".join(p for p in rest.split(".") if p)


def artifact_context(
    access: RunAccess,
    key: str | None,
    *,
    editor: str = "",
    text: str | None = None,
    errors: list[dict[str, str]] | None = None,
    post=None,
    base_version: int | None = None,
    idempotency_key: str | None = None,
    mode: str = "patch",
) -> dict[str, Any]:
    run = access.run
    state = run_state(run)
    versions = artifact_versions_by_key(run)
    keys = list(state.artifacts) or list(versions)
    if key is None and keys:
        key = keys[0]
    latest = state.artifacts.get(key) if key else None
    schema = schema_registry().get(latest["typeId"]) if latest else None
    data = latest.get("data") if latest else None
    errors = errors or []
    form = build_form(schema, data) if latest and "data" in latest else None
    form_note = ""
    if latest and form is None:
        if schema is None:
            form_note = f"No schema is registered for {latest['typeId']}, so this artifact is edited as JSON."
        else:
            form_note = (
                "This schema's top level is neither an object with named fields nor a list of such "
                "objects, so it is edited as JSON."
            )
    shown = form if editor != "json" else None  # the form, unless the JSON editor was asked for
    other_errors = errors
    if shown is not None:
        if post is not None:
            fill_from_post(shown, post)
        other_errors = attach_errors(shown, errors)
    json_fields = [f for f in shown.walk() if f.kind == "json"] if shown is not None else []
    return {
        "run": run,
        "url_id": access.url_id,
        "demo": access.demo,
        "can_edit": access.can_review and not run.is_finished,
        "keys": keys,
        "key": key,
        "latest": latest,
        "versions": versions.get(key, []) if key else [],
        "schema": schema,
        "form": shown,
        "form_available": form is not None,
        "form_note": form_note,
        "json_fields": json_fields,
        "text": text if text is not None else orjson.dumps(data, option=orjson.OPT_INDENT_2).decode(),
        "errors": errors,
        "other_errors": other_errors,
        "base_version": base_version if base_version is not None else (latest["version"] if latest else 0),
        "idempotency_key": idempotency_key or f"web-{secrets.token_hex(12)}",
        "mode": mode,
        "nav_active": "runs",
        "detail_url": reverse("runs:demo") if access.demo else reverse("runs:detail", args=[run.run_id]),
    }


@run_page
def artifact_editor(request: HttpRequest, access: RunAccess) -> HttpResponse:
    if request.method == "POST":
        return _save_artifact(request, access)
    key = request.GET.get("key") or None
    editor = "json" if request.GET.get("editor") == "json" else ""
    return render(request, "runs/artifacts.html", artifact_context(access, key, editor=editor))


def _save_artifact(request: HttpRequest, access: RunAccess) -> HttpResponse:
    if access.demo or not request.user.is_authenticated:
        raise Http404("read-only")
    require_action(request, Action.EDIT_ARTIFACT)
    run = access.run
    post = request.POST
    key = post.get("key", "")
    ikey = post.get("idempotency_key", "")[:200] or f"web-{secrets.token_hex(12)}"
    mode = "write" if post.get("mode") == "write" else "patch"
    try:
        base_version = int(post.get("base_version", "0"))
    except ValueError:
        base_version = 0
    state = run_state(run)
    latest = state.artifacts.get(key)
    if latest is None:
        raise Http404("no such artifact")
    schema = schema_registry().get(latest["typeId"])
    form = (
        build_form(schema, latest.get("data")) if "data" in latest and post.get("editor") == "form" else None
    )
    use_form = form is not None
    errors: list[dict[str, str]] = []
    text = post.get("data", "")
    data: Any = None
    if form is not None:
        data, errors = parse_form(form, post, latest.get("data"))
        text = orjson.dumps(data, option=orjson.OPT_INDENT_2).decode()
    else:
        data, problem = parse_json_field(text)
        if problem:
            errors.append({"path": "/", "field": "", "message": problem})
    if form is not None:
        # every problem at once: what could not be read, then the schema's view of the rest
        unreadable = {e["path"] for e in errors}
        errors += [e for e in form_schema_errors(form, schema, data) if e["path"] not in unreadable]
    elif not errors:
        errors = schema_errors(schema, data)

    def rerender(status: int = 422) -> HttpResponse:
        ctx = artifact_context(
            access,
            key,
            editor="" if use_form else "json",
            text=text,
            errors=errors,
            post=post if use_form else None,
            base_version=base_version,
            idempotency_key=ikey,
            mode=mode,
        )
        return render(request, "runs/artifacts.html", ctx, status=status)

    if errors:
        return rerender()
    if mode == "patch":
        base_row = artifact_versions(run, key, [base_version]).get(base_version)
        base_data = base_row.data.get("data") if base_row else None
        if base_row is None or base_data is None:
            mode = "write"
    try:
        if mode == "patch":
            patch = jsonpatch.make_patch(base_data, data).patch
            command: Any = cmd.PatchArtifact(
                key=key, from_version=base_version, patch=patch, idempotency_key=ikey
            )
        else:
            command = cmd.WriteArtifact(
                key=key,
                type_id=latest["typeId"],
                data=data,
                idempotency_key=ikey,
                expected_version=base_version,
            )
        result = actions.do_command(
            workspace=run.workspace, run_id=run.run_id, command=command, actor=actor_for(request)
        )
    except actions.ActionError as exc:
        pointer = _engine_path_to_pointer(exc.path or "")
        field_name = pointer.split("/")[1] if pointer != "/" else ""
        errors = [{"path": pointer, "field": field_name, "message": f"{exc.code}: {exc.message}"}]
        return rerender(409 if exc.code in ("PATCH_FAILED", "IDEMPOTENCY_CONFLICT") else 422)
    # A repeated submit of a saved form is an idempotent no-op: the key answers the version it made.
    done = result.state.idempotency.get(ikey) or result.state.artifacts.get(key, {})
    version = done.get("version")
    messages.success(request, f"Saved {key} v{version}.")
    return redirect(reverse("runs:artifacts", args=[run.run_id]) + f"?key={quote(key)}")


@run_page
@require_GET
def artifact_diff(request: HttpRequest, access: RunAccess) -> HttpResponse:
    key = request.GET.get("key", "")
    a = int_param(request.GET, "a", 1, minimum=1)
    b = int_param(request.GET, "b", None, minimum=1)
    rows = artifact_versions(access.run, key, [v for v in (a, b) if v])
    if a not in rows or (b is not None and b not in rows):
        raise Http404("no such version")
    if b is None:
        b = a
    left, right = rows[a].data, rows[b].data
    changes = diff_values(left.get("data"), right.get("data"))
    ctx = artifact_context(access, key)
    ctx.update({"a": a, "b": b, "left": left, "right": right, "changes": changes})
    return render(request, "runs/artifact_diff.html", ctx)
