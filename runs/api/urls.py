"""REST API routes (django-ninja), mounted at /api/.

Every response under /api/ (errors and unknown paths included) carries
``Link: </api/openapi.json>; rel="describedby"`` and is JSON; oversized bodies are refused
with 413 before any parsing; a write that reserved an Idempotency-Key stores its response.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, URLResolver, include, path, re_path
from django.views.decorators.csrf import csrf_exempt

from accounts import idempotency
from runs.api.app import api, error_response, too_large_response
from runs.api.errors import METHOD_NOT_ALLOWED, NOT_FOUND

DESCRIBED_BY = '</api/openapi.json>; rel="describedby"'


def _declared_length(request: HttpRequest) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def api_view(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if _declared_length(request) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            response = too_large_response(request)
        else:
            try:
                response = view(request, *args, **kwargs)
            except RequestDataTooBig:
                response = too_large_response(request)
            if response.status_code == 405 and not response.get("Content-Type", "").startswith(
                "application/json"
            ):
                allowed = response.get("Allow", "")
                response = error_response(
                    request, METHOD_NOT_ALLOWED, f"{request.method} is not allowed here", 405
                )
                if allowed:
                    response["Allow"] = allowed
            record = getattr(request, "idempotency_record", None)
            if record is not None:
                idempotency.finish(record, response)
        response["Link"] = DESCRIBED_BY
        return response

    return wrapper


@csrf_exempt
def unknown_path(request: HttpRequest, path: str = "") -> HttpResponse:
    return error_response(request, NOT_FOUND, f"no API endpoint at /api/{path}", 404)


def _wrap(patterns: list[URLPattern | URLResolver]) -> list[URLPattern | URLResolver]:
    for pattern in patterns:
        if isinstance(pattern, URLPattern):
            pattern.callback = api_view(pattern.callback)
    return patterns


_patterns, _app_name, _namespace = api.urls
urlpatterns = [
    path("", include((_wrap(list(_patterns)), _app_name), namespace=_namespace)),
    re_path(r"^(?P<path>.*)$", api_view(unknown_path)),
]
