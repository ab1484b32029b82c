"""Sign-in with a budget of failures that slows guessing down without locking the owner out.

Failed attempts count in the shared cache (accounts.ratelimit, sliding window), keyed by:

- (account name, client address): after ``WORKBENCH_LOGIN_FAILURES_PER_ACCOUNT`` failures, that
  address is refused for that name (429) until the window slides, even with the right password.
  Another address, the owner's new one, is not affected.
- the client address, across names (``WORKBENCH_LOGIN_FAILURES_PER_ADDRESS``): one address
  guessing many names is refused.
- the account name, across addresses: once it has had ``WORKBENCH_LOGIN_FAILURES_PER_ACCOUNT``
  failures (guesses from many addresses), every address gets at most one attempt at that name per
  ``WORKBENCH_LOGIN_SLOWDOWN_SECONDS``: guessing slows down, while the owner still signs in from
  a new address (its first attempt goes through at once).

The refusal reads the same for names that exist and names that do not (only the name typed is
counted, never looked up), so it reveals nothing about accounts.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.contrib.auth.views import LoginView
from django.http import HttpResponse

from accounts import ratelimit

REFUSED = "Too many failed sign-in attempts. Try again in {seconds} seconds."
_UNLIMITED = 1 << 30  # a counter that only counts


def _setting(name: str, default: int) -> int:
    return int(getattr(settings, name, default))


def _window() -> int:
    return _setting("WORKBENCH_LOGIN_FAILURE_WINDOW_SECONDS", 900)


def _who(request) -> tuple[str, str]:
    name = (request.POST.get("username") or "").strip().casefold()
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return digest, request.META.get("REMOTE_ADDR") or "unknown"


def _failure_keys(request) -> list[tuple[str, int]]:
    """(cache key, budget) of each failure counter an attempt counts against (budget 0: off)."""
    account, address = _who(request)
    per_account = _setting("WORKBENCH_LOGIN_FAILURES_PER_ACCOUNT", 0)
    return [
        (f"login-fail:pair:{account}:{address}", per_account),
        (f"login-fail:addr:{address}", _setting("WORKBENCH_LOGIN_FAILURES_PER_ADDRESS", 0)),
        (f"login-fail:acct:{account}", _UNLIMITED if per_account > 0 else 0),
    ]


def refusal(request) -> int | None:
    """Seconds to wait before this attempt may be made (None: it may be made now)."""
    account, address = _who(request)
    window = _window()
    for key, limit in _failure_keys(request)[:2]:
        if limit > 0:
            decision = ratelimit.peek(key, limit=limit, window=window)
            if not decision.allowed:
                return decision.retry_after
    per_account = _setting("WORKBENCH_LOGIN_FAILURES_PER_ACCOUNT", 0)
    if (
        per_account > 0
        and not ratelimit.peek(f"login-fail:acct:{account}", limit=per_account, window=window).allowed
    ):
        # Under attack from many addresses: one attempt per address per slowdown period.
        pace = max(1, _setting("WORKBENCH_LOGIN_SLOWDOWN_SECONDS", 5))
        decision = ratelimit.hit(f"login-slow:{account}:{address}", limit=1, window=pace)
        if not decision.allowed:
            return decision.retry_after
    return None


class ThrottledLoginView(LoginView):
    def post(self, request, *args, **kwargs) -> HttpResponse:
        wait = refusal(request)
        if wait is not None:
            context = self.get_context_data(throttled=REFUSED.format(seconds=wait))
            response = self.render_to_response(context, status=429)
            response["Retry-After"] = str(wait)
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form) -> HttpResponse:
        for key, limit in _failure_keys(self.request):
            if limit > 0:
                ratelimit.hit(key, limit=limit, window=_window())
        return super().form_invalid(form)
