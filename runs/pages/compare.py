"""Two runs of the workspace side by side: ``/compare/?a=<run id>&b=<run id>``.

Reached from a fork's run page (compared with its source), the runs list (two checkboxes and
"Compare", a plain GET form: ``?run=X&run=Y`` redirects to the shareable ``?a=&b=`` URL, older run
first) and a replay's determinism report (``&at=divergence``). Either id of another workspace, or
of no run, answers the same 404. ``pos=A.B`` pages the aligned trace. The totals of runs too big
to add up within the page (``summary_is_cheap``) come from ``part=summary`` (htmx on load; without
JavaScript a link to ``summary=1``).
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from runs.selectors.compare import BadCursor, Cursor, summary_is_cheap
from runs.web.partials import compare_context, compare_summary_context, compare_url
from runs.web.request import HtmxHttpRequest, get_run_for_user


def _refuse(request: HttpRequest, message: str) -> HttpResponse:
    context = {"error": f"INVALID_INPUT: {message}", "nav_active": "runs", "form": request.GET}
    return render(request, "runs/compare.html", context, status=400)


@login_required
@require_GET
@vary_on_headers("HX-Request")
def compare_runs(request: HtmxHttpRequest) -> HttpResponse:
    picked = [v for v in request.GET.getlist("run") if v]
    if picked or "run" in request.GET:
        if len(picked) != 2:
            return _refuse(request, f"select exactly two runs to compare (you selected {len(picked)})")
        older, newer = sorted(
            (get_run_for_user(request, i) for i in picked), key=lambda r: (r.started_at, r.pk)
        )
        return redirect(compare_url(older.run_id, newer.run_id))
    a_id, b_id = request.GET.get("a", ""), request.GET.get("b", "")
    if not a_id and not b_id:
        return render(request, "runs/compare.html", {"nav_active": "runs", "form": request.GET})
    if not a_id or not b_id:
        return _refuse(request, "name two runs, a and b")
    run_a = get_run_for_user(request, a_id)  # 404 for both missing and foreign runs
    run_b = get_run_for_user(request, b_id)
    if run_a.pk == run_b.pk:
        return _refuse(request, "a and b are the same run: choose two different runs")
    pos = None
    if request.GET.get("pos"):
        try:
            pos = Cursor.parse(request.GET["pos"])
        except BadCursor as exc:
            return _refuse(request, str(exc))
    if request.GET.get("part") == "summary":  # the totals of big runs, asked for apart
        return render(request, "runs/compare.html#summary", compare_summary_context(run_a, run_b))
    summary = request.GET.get("summary") == "1" or summary_is_cheap(run_a, run_b)
    context = compare_context(
        run_a, run_b, pos=pos, jump=request.GET.get("at") == "divergence", summary=summary
    )
    template = "runs/compare.html#aligned" if request.htmx else "runs/compare.html"
    return render(request, template, context)
