"""An e-mailed decision link's page: GET shows the gate and asks to confirm, POST decides.

Opening a link never decides (mail scanners open links). The page says in words why a link
decides nothing (unknown, used, expired, another person's, the gate already decided); a link that
needs a signed-in session leads through the sign-in page and back.
"""

from __future__ import annotations

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from runs.actions.gatelinks import DECISIONS, LinkView, do_decide_by_link, open_link

# What each refusal answers with (the page says why in words either way).
STATUS = {
    "LINK_UNKNOWN": 404,
    "LINK_FOREIGN": 403,
    "FORBIDDEN": 403,
    "LINK_USED": 410,
    "LINK_EXPIRED": 410,
    "GATE_DECIDED": 409,
    "RUN_NOT_FOUND": 404,
    "INVALID_INPUT": 400,
}


def _render(request: HttpRequest, view: LinkView, *, decision: str, decided: bool = False) -> HttpResponse:
    status = 200 if decided or not view.problem else STATUS.get(view.code, 409)
    response = render(
        request,
        "runs/gate_link.html",
        {"view": view, "decision": decision, "decided": decided, "decisions": DECISIONS},
        status=status,
    )
    # The token is in the address: never sent to another site as a Referer ("no-referrer" would
    # make Chromium send "Origin: null" with the form, which CSRF refuses), never cached.
    response["Referrer-Policy"] = "same-origin"
    response["X-Robots-Tag"] = "noindex"
    return response


@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def gate_link(request: HttpRequest, token: str) -> HttpResponse:
    if request.method == "POST":
        decision = request.POST.get("decision", "")
        view = do_decide_by_link(token, request.user, decision=decision, note=request.POST.get("note"))
        if view.sign_in:
            return redirect_to_login(request.get_full_path())
        return _render(request, view, decision=decision, decided=not view.problem)
    decision = request.GET.get("decision", "")
    view = open_link(token, request.user)
    if view.sign_in:
        return redirect_to_login(request.get_full_path())
    return _render(request, view, decision=decision if decision in DECISIONS else "")
