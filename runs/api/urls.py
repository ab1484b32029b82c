"""REST API routes (django-ninja), mounted at /api/.

Every response under /api/ (errors and unknown paths included) carries
``Link: </api/openapi.json>; rel="describedby"`` and is JSON; oversized bodies are refused
with 413 before any parsing; a write that reserved an Idempotency-Key stores its response.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from inspect import iscoroutinefunction
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, URLResolver, include, path, re_path
from django.views.decorators.csrf import csrf_exempt

import runs.ids  # noqa: F401  (registers the runid converter the routes use)
from accounts import idempotency
from runs.api.app import api, error_response, too_large_response
from runs.api.auth import IDEMPOTENCY_HEADER, WRITE_METHODS
from runs.api.errors import METHOD_NOT_ALLOWED, NOT_FOUND
from runs.web.spool import spooled_if_any
from runs.web.uploads import API_DESCRIBED_BY, request_limit

DESCRIBED_BY = API_DESCRIBED_BY


def _declared_length(request: HttpRequest) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def _idempotent_write(request: HttpRequest) -> bool:
    return request.method in WRITE_METHODS and IDEMPOTENCY_HEADER in request.headers


def api_view(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        try:
            response = _answer(view, request, *args, **kwargs)
        finally:
            spooled = spooled_if_any(request)  # a bundle import's body copy (runs/web/spool.py)
            if spooled is not None:
                spooled.discard()  # gone already when a job took it
        # a list's own link (rel="next" of a keyset page) stays beside the description's
        response["Link"] = ", ".join(filter(None, [response.get("Link"), DESCRIBED_BY]))
        return response

    return wrapper


def _answer(view: Callable[..., HttpResponse], request: HttpRequest, *args, **kwargs) -> HttpResponse:
    if _declared_length(request) > request_limit(request):
        return too_large_response(request)
    if not _idempotent_write(request):
        return _handle(view, request, *args, **kwargs)
    # The key's reservation, the write and the stored response commit together: a crash anywhere
    # before the commit leaves no trace (a retry runs once, afresh); after it, a retry is
    # answered from the stored response. A concurrent retry waits on the key's unique index
    # until the first one commits, then replays it.
    with transaction.atomic():
        response = _handle(view, request, *args, **kwargs)
        if response.status_code >= 500:
            transaction.set_rollback(True)
    return response


def async_api_view(view: Callable[..., Any]) -> Callable[..., Any]:
    """``api_view`` for an async route (a long poll): reads only, so no idempotent-write branch."""

    @functools.wraps(view)
    async def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if _declared_length(request) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            response = too_large_response(request)
        else:
            response = await view(request, *args, **kwargs)
        response["Link"] = DESCRIBED_BY
        return response

    return wrapper


def _handle(view: Callable[..., HttpResponse], request: HttpRequest, *args, **kwargs) -> HttpResponse:
    try:
        response = view(request, *args, **kwargs)
    except RequestDataTooBig:
        response = too_large_response(request)
    if response.status_code == 405 and not response.get("Content-Type", "").startswith("application/json"):
        allowed = response.get("Allow", "")
        response = error_response(request, METHOD_NOT_ALLOWED, f"{request.method} is not allowed here", 405)
        if allowed:
            response["Allow"] = allowed
    record = getattr(request, "idempotency_record", None)
    if record is not None and not transaction.get_connection().needs_rollback:
        idempotency.finish(record, response)
    return response


@csrf_exempt
def unknown_path(request: HttpRequest, path: str = "") -> HttpResponse:
    return error_response(request, NOT_FOUND, f"no API endpoint at /api/{path}", 404)


def _wrap(patterns: list[URLPattern | URLResolver]) -> list[URLPattern | URLResolver]:
    for pattern in patterns:
        if isinstance(pattern, URLPattern):
            wrap = async_api_view if iscoroutinefunction(pattern.callback) else api_view
            pattern.callback = wrap(pattern.callback)
    return patterns


_patterns, _app_name, _namespace = api.urls
urlpatterns = [
    path("", include((_wrap(list(_patterns)), _app_name), namespace=_namespace)),
    re_path(r"^(?P<path>.*)$", api_view(unknown_path)),
]
