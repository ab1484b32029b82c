"""Sign-in with a budget of failures, per account name and per client address.

Failed attempts count in the shared cache (accounts.ratelimit, sliding window): once an account
name or an address has spent its budget, further attempts are refused with 429 until the window
slides, even with the right password. The refusal reads the same for names that exist and names
that do not, so it reveals nothing about accounts.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.contrib.auth.views import LoginView
from django.http import HttpResponse

from accounts import ratelimit

REFUSED = "Too many failed sign-in attempts. Try again in {seconds} seconds."


def _keys(request) -> list[tuple[str, int]]:
    name = (request.POST.get("username") or "").strip().casefold()
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    address = request.META.get("REMOTE_ADDR") or "unknown"
    return [
        (f"login-fail:acct:{digest}", int(getattr(settings, "WORKBENCH_LOGIN_FAILURES_PER_ACCOUNT", 0))),
        (f"login-fail:addr:{address}", int(getattr(settings, "WORKBENCH_LOGIN_FAILURES_PER_ADDRESS", 0))),
    ]


def _window() -> int:
    return int(getattr(settings, "WORKBENCH_LOGIN_FAILURE_WINDOW_SECONDS", 900))


class ThrottledLoginView(LoginView):
    def post(self, request, *args, **kwargs) -> HttpResponse:
        for key, limit in _keys(request):
            if limit <= 0:
                continue
            decision = ratelimit.peek(key, limit=limit, window=_window())
            if not decision.allowed:
                context = self.get_context_data(throttled=REFUSED.format(seconds=decision.retry_after))
                response = self.render_to_response(context, status=429)
                response["Retry-After"] = str(decision.retry_after)
                return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form) -> HttpResponse:
        for key, limit in _keys(self.request):
            if limit > 0:
                ratelimit.hit(key, limit=limit, window=_window())
        return super().form_invalid(form)
