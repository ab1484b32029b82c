"""Importing a bundle: upload, see the verification stages, confirm."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from runs import actions
from runs.actions.importjobs import (
    async_threshold,
    do_cancel_import_job,
    do_create_import_job,
    import_dir,
    open_private,
)
from runs.actions.permissions import Action
from runs.models import ImportJob
from runs.protocol.bundle import check_bundle, check_bundle_file
from runs.selectors.runs import find_run
from runs.selectors.signing import bundle_signature
from runs.web.request import (
    HtmxHttpRequest,
    actor_for,
    current_workspace,
    may,
    require_action,
)
from runs.web.uploads import bundle_limit, purge_stale_uploads


def _import_dir() -> Path:
    return import_dir()


IMPORT_SESSION_KEY = "workbench_imports"


def import_stages(result: Any) -> list[dict[str, str]]:
    """check_bundle's verdict as the stages it runs in order: JSON and version, schema, integrity, structure."""
    parse_codes = ("INVALID_JSON", "UNSUPPORTED_PROTOCOL_VERSION")
    stages = []
    parse_failed = result.integrity == "unchecked" and result.code in parse_codes
    stages.append({"name": "JSON and protocol version", "state": "failed" if parse_failed else "ok"})
    if parse_failed:
        schema = "skipped"
    elif result.integrity == "unchecked" and not result.ok:
        schema = "failed"
    else:
        schema = "ok"
    stages.append({"name": "Schema", "state": schema})
    integrity = {"valid": "ok", "mismatch": "failed", "missing": "failed"}.get(result.integrity, "skipped")
    stages.append(
        {"name": "Integrity (SHA-256 over canonical JSON)", "state": integrity, "detail": result.integrity}
    )
    structure = "skipped" if result.integrity != "valid" else ("ok" if result.ok else "failed")
    stages.append({"name": "Structure (steps, events, versions)", "state": structure})
    return stages


def signature_stage(signature: dict[str, Any] | None) -> dict[str, str]:
    """The signature's stage: passed only for a verified signature; an unsigned bundle is not "signed"."""
    name = "Signature (Ed25519, this instance's keys)"
    if signature is None:
        return {"name": name, "state": "skipped"}
    if signature["status"] == "signed":
        return {"name": name, "state": "ok"}
    if signature["status"] == "unsigned":
        return {"name": name, "state": "unsigned"}
    return {"name": name, "state": "failed", "detail": signature["code"]}


def check_signature(result: Any) -> dict[str, Any] | None:
    """The signature verdict of a bundle that passed the check (``None`` when it did not)."""
    if not result.ok or result.bundle is None:
        return None
    return bundle_signature(result.bundle, result.gate_resolved).to_json()


@login_required
def import_bundle(request: HttpRequest) -> HttpResponse:
    """Upload a bundle, see the verification (integrity, schema, structure), then confirm the import."""

    workspace = current_workspace(request)
    ctx: dict[str, Any] = {
        "nav_active": "import",
        "can_import": may(request, Action.IMPORT_BUNDLE),
    }
    if request.method != "POST":
        return render(request, "runs/import.html", ctx)
    require_action(request, Action.IMPORT_BUNDLE)
    purge_stale_uploads(_import_dir())
    post = request.POST  # parsed now: the upload handler enforces the body limit while reading
    if getattr(request, "body_too_large", False):
        ctx["upload_error"] = (
            f"PAYLOAD_TOO_LARGE: the upload exceeds the server's limit of {bundle_limit()} bytes "
            "for a bundle (WORKBENCH_MAX_BUNDLE_BYTES), the same for the API and this page."
        )
        return render(request, "runs/import.html", ctx, status=413)
    pending: dict[str, str] = request.session.get(IMPORT_SESSION_KEY, {})
    if post.get("confirm"):
        token = request.POST.get("token", "")
        name = pending.get(token)
        if not name:
            messages.error(request, "That upload has expired; upload the bundle again.")
            return redirect("runs:import")
        path = _import_dir() / name
        if path.exists() and path.stat().st_size >= async_threshold():
            # a large bundle: a background job verifies and stores it (progress on its page)
            job = do_create_import_job(
                workspace=workspace, path=path, actor=actor_for(request),
                as_new_id=bool(request.POST.get("as_new_id")),
            )  # fmt: skip
            pending.pop(token, None)
            request.session[IMPORT_SESSION_KEY] = pending
            return redirect("runs:import_job", job.job_id)
        try:
            data = path.read_bytes()
        except OSError:
            messages.error(request, "That upload has expired; upload the bundle again.")
            return redirect("runs:import")
        try:
            run = actions.do_import_bundle(
                workspace=workspace,
                data=data,
                actor=actor_for(request),
                as_new_id=bool(request.POST.get("as_new_id")),
            )
        except actions.ActionError as exc:
            check = check_bundle(data)
            ctx.update(
                {
                    "import_error": f"{exc.code}: {exc.message}",
                    "token": token,
                    "check": check,
                    "signature": check_signature(check),
                }
            )
            return render(
                request, "runs/import.html", ctx, status=409 if exc.code == "RUN_ID_COLLISION" else 422
            )
        pending.pop(token, None)
        request.session[IMPORT_SESSION_KEY] = pending
        path.unlink(missing_ok=True)
        messages.success(request, f"Imported run {run.run_id}.")
        return redirect("runs:detail", run.run_id)
    upload = request.FILES.get("bundle")
    if upload is None:
        ctx["upload_error"] = "Choose a bundle file (.json) to upload."
        return render(request, "runs/import.html", ctx, status=422)
    size = upload.size or 0  # Django sets it for every uploaded file
    if size > bundle_limit():
        ctx["upload_error"] = (
            f"PAYLOAD_TOO_LARGE: the upload exceeds the server's limit of {bundle_limit()} bytes "
            "for a bundle (WORKBENCH_MAX_BUNDLE_BYTES), the same for the API and this page."
        )
        return render(request, "runs/import.html", ctx, status=413)
    # The upload is on disk already (a temporary file beyond FILE_UPLOAD_MAX_MEMORY_SIZE): it is
    # copied in chunks to where it waits for the confirmation, then checked from there.
    token = secrets.token_urlsafe(16)
    name = f"{token}.json"
    path = _import_dir() / name
    with open_private(path) as out:
        for chunk in upload.chunks():
            out.write(chunk)
    if size >= async_threshold():
        # too large to check as one document here (its peak memory is ~6x the file): the job
        # that imports it checks it streamed, and stores nothing if any check fails
        pending[token] = name
        request.session[IMPORT_SESSION_KEY] = dict(list(pending.items())[-5:])
        ctx.update({"token": token, "filename": upload.name, "size": upload.size, "large": True})
        return render(request, "runs/import.html", ctx)
    result = check_bundle_file(path)
    signature = check_signature(result)
    ctx["check"] = result
    ctx["signature"] = signature
    ctx["stages"] = [*import_stages(result), signature_stage(signature)]
    ctx["filename"] = upload.name
    ctx["size"] = upload.size
    # A signature that is present and refused (forged, revoked key, another bundle's) refuses the
    # import as do_import_bundle would; a key this instance does not know is reported, not refused.
    refused = signature is not None and not signature["ok"] and signature["code"] != "UNKNOWN_KEY"
    if not result.ok or refused:
        path.unlink(missing_ok=True)
    else:
        pending[token] = name
        request.session[IMPORT_SESSION_KEY] = dict(list(pending.items())[-5:])
        ctx["token"] = token
        bundle = result.bundle or {}
        run_doc = bundle.get("run") or {}
        ctx["summary"] = {
            "run_id": run_doc.get("id"),
            "workflow": run_doc.get("workflowId"),
            "status": run_doc.get("status"),
            "events": len(bundle.get("trace") or []),
            "artifacts": len(bundle.get("artifacts") or []),
            "rule_sets": len(bundle.get("ruleSets") or []),
            "exists": find_run(workspace, str(run_doc.get("id"))) is not None,
        }
    return render(request, "runs/import.html", ctx, status=200 if result.ok and not refused else 422)


@require_GET
@login_required
@vary_on_headers("HX-Request")
def import_job(request: HtmxHttpRequest, job_id: str) -> HttpResponse:
    """A background import's progress and outcome (the section polls itself while the job runs)."""
    require_action(request, Action.VIEW_RUN)
    job = _job(request, job_id)
    read = job.size if job.status == "succeeded" else job.bytes_read
    ctx = {
        "job": job,
        "percent": int(100 * read / job.size) if job.size else 100,
        "can_cancel": may(request, Action.IMPORT_BUNDLE) and job.status in ("queued", "running"),
        "nav_active": "import",
    }
    template = "runs/import_job.html#job-status" if request.htmx else "runs/import_job.html"
    return render(request, template, ctx)


def _job(request: HttpRequest, job_id: str) -> ImportJob:
    """The current workspace's job (another workspace's answers 404 like a missing one)."""
    found = (
        ImportJob.objects.filter(workspace=current_workspace(request), job_id=job_id[:40])
        if "\x00" not in job_id
        else None
    )
    job = found.first() if found is not None else None
    if job is None:
        raise Http404("no such import job")
    return job


@require_POST
@login_required
def cancel_import_job(request: HttpRequest, job_id: str) -> HttpResponse:
    """Cancel a background import (the job's page shows it end: nothing is stored)."""
    require_action(request, Action.IMPORT_BUNDLE)
    job = _job(request, job_id)
    try:
        job = do_cancel_import_job(job, actor=actor_for(request))
    except actions.ActionError as exc:
        messages.error(request, exc.message)
    else:
        if job.status == "failed":
            messages.success(request, "Import cancelled: nothing was stored.")
        else:
            messages.success(request, "Cancel sent: the import stops after the batch it is writing.")
    return redirect("runs:import_job", job.job_id)
