"""The artifact editor (form or JSON) and the version diff."""

from __future__ import annotations

import secrets
from typing import Any

import jsonpatch
import orjson
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from runs import actions
from runs.engine import commands as cmd
from runs.models import Role
from runs.pages.access import RunAccess, run_page
from runs.pages.artifact_forms import (
    coerce_form_value,
    schema_errors,
    schema_registry,
    simple_form_fields,
)
from runs.pages.params import int_param, parse_json_field
from runs.selectors import (
    artifact_versions,
    artifact_versions_by_key,
    run_state,
)
from runs.timeline import diff_values
from runs.web import (
    actor_for,
    require_role,
)


def artifact_context(
    access: RunAccess,
    key: str | None,
    *,
    text: str | None = None,
    errors: list[dict[str, str]] | None = None,
    form_values: dict[str, Any] | None = None,
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
    fields = simple_form_fields(schema)
    data = latest.get("data") if latest else None
    errors = errors or []
    field_errors: dict[str, list[str]] = {}
    for err in errors:
        field_errors.setdefault(err.get("field", ""), []).append(f"{err['path']}: {err['message']}")
    if fields:
        values = form_values if form_values is not None else (data if isinstance(data, dict) else {})
        for f in fields:
            f["value"] = values.get(f["name"]) if isinstance(values, dict) else None
            f["errors"] = field_errors.get(f["name"], [])
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
        "fields": fields,
        "text": text if text is not None else orjson.dumps(data, option=orjson.OPT_INDENT_2).decode(),
        "errors": errors,
        "field_errors": field_errors,
        "other_errors": [
            e for e in errors if not fields or e.get("field", "") not in {f["name"] for f in fields}
        ],
        "base_version": base_version if base_version is not None else (latest["version"] if latest else 0),
        "idempotency_key": idempotency_key or f"web-{secrets.token_hex(12)}",
        "mode": mode,
        "nav_active": "runs",
        "detail_url": reverse("runs:demo") if access.demo else reverse("runs:detail", args=[run.pk]),
    }


@run_page
def artifact_editor(request: HttpRequest, access: RunAccess) -> HttpResponse:
    if request.method == "POST":
        return _save_artifact(request, access)
    key = request.GET.get("key") or None
    return render(request, "runs/artifacts.html", artifact_context(access, key))


def _save_artifact(request: HttpRequest, access: RunAccess) -> HttpResponse:
    if access.demo or not request.user.is_authenticated:
        raise Http404("read-only")
    require_role(request, Role.REVIEWER)
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
    fields = simple_form_fields(schema)
    errors: list[dict[str, str]] = []
    form_values: dict[str, Any] | None = None
    text = post.get("data", "")
    data: Any = None
    if fields and post.get("editor") == "form":
        base = dict(latest.get("data") or {}) if isinstance(latest.get("data"), dict) else {}
        form_values = {}
        for f in fields:
            value, problem = coerce_form_value(f["type"], post.get(f"field_{f['name']}", ""))
            form_values[f["name"]] = value
            if problem:
                errors.append({"path": f"/{f['name']}", "field": f["name"], "message": problem})
            elif value is None and f["type"] != "boolean":
                base.pop(f["name"], None)
            else:
                base[f["name"]] = value
        data = base
        text = orjson.dumps(data, option=orjson.OPT_INDENT_2).decode()
    else:
        data, problem = parse_json_field(text)
        if problem:
            errors.append({"path": "/", "field": "", "message": problem})
    if not errors:
        errors = schema_errors(schema, data)

    def rerender(status: int = 422) -> HttpResponse:
        ctx = artifact_context(
            access,
            key,
            text=text,
            errors=errors,
            form_values=form_values,
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
            workspace=run.workspace, run_id=run.pk, command=command, actor=actor_for(request)
        )
    except actions.ActionError as exc:
        path = exc.path or ""
        field_name = path.split(".", 1)[1].split(".")[0].split("[")[0] if path.startswith("data.") else ""
        errors = [{"path": path or "/", "field": field_name, "message": f"{exc.code}: {exc.message}"}]
        return rerender(409 if exc.code in ("PATCH_FAILED", "IDEMPOTENCY_CONFLICT") else 422)
    # A repeated submit of a saved form is an idempotent no-op: the key answers the version it made.
    done = result.state.idempotency.get(ikey) or result.state.artifacts.get(key, {})
    version = done.get("version")
    messages.success(request, f"Saved {key} v{version}.")
    return redirect(reverse("runs:artifacts", args=[run.pk]) + f"?key={key}")


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
