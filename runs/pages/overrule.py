"""Overrule a machine decision from the gate panel: one POST forks the run from before the gate a
judge decided, with the reviewer's own decision (runs.actions.overrule.do_overrule)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from runs.actions import ActionError
from runs.actions.overrule import do_overrule
from runs.actions.permissions import Action
from runs.models import Run
from runs.pages.access import run_write
from runs.web.request import actor_for


@run_write(Action.RESOLVE_GATE)
def overrule(request: HttpRequest, run: Run) -> HttpResponse:
    post = request.POST
    raw = post.get("seq", "")
    decision = post.get("decision", "")
    try:
        fork = do_overrule(
            workspace=run.workspace,
            run_id=run.run_id,
            seq=int(raw) if raw.isdigit() else raw,
            decision=decision,
            note=post.get("note", ""),
            actor=actor_for(request),
        )
    except ActionError as exc:
        messages.error(request, f"Could not overrule: {exc.message} ({exc.code})")
        return redirect(reverse("runs:detail", args=[run.run_id]) + "#gates")
    messages.success(
        request,
        f"Overruled: {fork.run.run_id} is a fork from before #{fork.from_seq} of {run.run_id}, "
        f"where you {decision} the gate. The judge's decision stays on {run.run_id}.",
    )
    return redirect(reverse("runs:detail", args=[fork.run.run_id]) + "#gates")
