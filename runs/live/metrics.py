"""`GET /live/metrics`: counters of the live path in this process (staff only, JSON)."""

from __future__ import annotations

import os

from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest
from django.urls import path
from django.views.decorators.http import require_GET

from runs.live.publisher import metrics
from runs.web.wire import WireJsonResponse


@require_GET
@staff_member_required
def live_metrics(request: HttpRequest) -> WireJsonResponse:
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    return WireJsonResponse(
        {
            "pid": os.getpid(),
            "layer": type(layer).__name__ if layer else None,
            "counters": metrics.snapshot(),
        },
        headers={"Cache-Control": "no-store"},
    )


app_name = "live"
urlpatterns = [path("metrics", live_metrics, name="metrics")]
