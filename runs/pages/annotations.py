"""All annotations of a run, paged and cut to a bounded length; any one of them whole as text."""

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from runs.pages.access import RunAccess, run_page
from runs.pages.params import int_param
from runs.selectors.annotations import annotations_page, full_text
from runs.selectors.runs import run_state


@run_page
@require_GET
def annotations(request: HttpRequest, access: RunAccess) -> HttpResponse:
    run = access.run
    doc = run_state(run).run
    index = int_param(request.GET, "full", None, minimum=-1)
    seq = int_param(request.GET, "seq", None, minimum=0)
    if index is not None or seq is not None:
        text = full_text(run, doc, index=index, seq=seq if index is None else None)
        if text is None:
            raise Http404("no such annotation")
        response = HttpResponse(text, content_type="text/plain; charset=utf-8")
        response["X-Content-Type-Options"] = "nosniff"
        return response
    page = annotations_page(
        run,
        doc,
        page=int_param(request.GET, "page", 1, minimum=1) or 1,
        after=int_param(request.GET, "after", None, minimum=0),
        before=int_param(request.GET, "before", None, minimum=0),
    )
    context = {
        "run": run,
        "url_id": access.url_id,
        "demo": access.demo,
        "detail_url": reverse("runs:demo") if access.demo else reverse("runs:detail", args=[access.url_id]),
        "listing": page,
        "nav_active": "runs",
    }
    return render(request, "runs/annotations.html", context)
