"""The branded 403/404/500 pages under DEBUG too (``make run``), not Django's yellow debug pages.

Django renders ``403.html``/``404.html``/``500.html`` only with DEBUG off. With DEBUG on (the
embedded profile ``make run`` serves), this middleware answers what a view raises (Http404,
PermissionDenied, any other exception) and an unmatched URL with the same branded pages, unless
the setting ``WORKBENCH_DEBUG_ERROR_PAGES`` asks for Django's debug pages (tracebacks included).
The 500 still logs the exception with its traceback (``django.request``).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.views import defaults

logger = logging.getLogger("django.request")


def _branded(request: HttpRequest, exc: Exception) -> HttpResponse:
    if isinstance(exc, Http404):
        return defaults.page_not_found(request, exc)
    if isinstance(exc, PermissionDenied):
        return defaults.permission_denied(request, exc)
    logger.error("Internal Server Error: %s", request.path, exc_info=exc, extra={"status_code": 500})
    return defaults.server_error(request)


class BrandedErrorPagesMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    @staticmethod
    def active() -> bool:
        return bool(settings.DEBUG) and not getattr(settings, "WORKBENCH_DEBUG_ERROR_PAGES", False)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            self.active()
            and response.status_code == 404
            and getattr(request, "resolver_match", None) is None
            and "text/html" in response.get("Content-Type", "")
        ):
            return defaults.page_not_found(request, Http404("no such page"))  # an unmatched URL
        return response

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        return _branded(request, exc) if self.active() else None
