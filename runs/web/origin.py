"""Where this server is reached: remembered for the links of notifications (runs.actions.outbox).

Without ``WORKBENCH_SITE_URL`` the links in webhooks, Slack messages and e-mails pointed at
``http://127.0.0.1:8000`` whatever port the server ran on. This middleware hands the origin of
each request that got past ``ALLOWED_HOSTS`` (``request.get_host()`` raises otherwise) to the
outbox, which uses it when the setting is empty. Set ``WORKBENCH_SITE_URL`` in production: a
server behind a proxy may be reached at several names.
"""

from __future__ import annotations

from inspect import iscoroutinefunction
from typing import Any

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest
from django.utils.decorators import sync_and_async_middleware

from runs.actions.outbox import remember_origin


def _remember(request: HttpRequest) -> None:
    if getattr(settings, "WORKBENCH_SITE_URL", ""):
        return
    try:
        remember_origin(f"{request.scheme}://{request.get_host()}")
    except DisallowedHost:  # answered 400 by Django further on; never a link
        pass


@sync_and_async_middleware
def site_origin_middleware(get_response: Any) -> Any:
    if iscoroutinefunction(get_response):

        async def middleware(request: HttpRequest) -> Any:
            _remember(request)
            return await get_response(request)

    else:

        def middleware(request: HttpRequest) -> Any:  # type: ignore[misc]
            _remember(request)
            return get_response(request)

    return middleware
