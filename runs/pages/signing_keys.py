"""Settings, Signing keys: the Ed25519 keys that sign this workspace's exported bundles (its own
and the instance's), which one signs now, and where verifiers find them. Read-only: keys are made,
rotated and revoked by the operator (``manage.py signing_key``), the seeds never reach a page."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from runs.selectors.signing import workspace_keys
from runs.web.request import current_workspace


@login_required
@require_GET
def signing_keys(request: HttpRequest) -> HttpResponse:
    workspace = current_workspace(request)
    return render(
        request,
        "runs/signing_keys.html",
        {
            "keys": workspace_keys(workspace),
            "jwks_url": request.build_absolute_uri(reverse("jwks_json")),
            "validity_url": request.build_absolute_uri(reverse("signing_keys_json")),
            "nav_active": "signing_keys",
        },
    )
