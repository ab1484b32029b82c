"""Fork pages: "Replay from here" / "Branch from here" (deep-linked from every timeline event)
and a replay's determinism report. The fork itself is runs.actions.forks.do_fork_with_history."""

from __future__ import annotations

import orjson
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from runs.actions import ActionError
from runs.actions.forks import determinism_report, do_fork_with_history
from runs.models import Role, RunFork
from runs.pages.access import run_access
from runs.web.request import actor_for, current_membership, get_run_for_user, require_role


@login_required
def fork_run(request: HttpRequest, run_id: str) -> HttpResponse:
    """GET: the form for ``?mode=replay|branch&seq=N``; POST (owners): create the fork."""
    run = get_run_for_user(request, run_id)  # 404 first: a foreign run is never revealed
    mode = request.POST.get("mode") or request.GET.get("mode") or "replay"
    raw_seq = request.POST.get("from_seq") or request.GET.get("seq") or "0"
    if request.method == "POST":
        require_role(request, Role.OWNER)
        overlay = None
        text = request.POST.get("overlay", "").strip()
        try:
            from_seq = int(raw_seq)
            if text and mode == "branch":
                overlay = orjson.loads(text)
            decision = request.POST.get("gate_decision", "")
            step = request.POST.get("gate_step", "")
            if mode == "branch" and decision and step:
                overlay = dict(overlay or {})
                overlay.setdefault("gateDecisions", {})[step] = decision
            fork = do_fork_with_history(
                workspace=run.workspace,
                source_run_id=run.run_id,
                mode=mode,
                from_seq=from_seq,
                overlay=overlay,
                actor=actor_for(request),
            )
        except (ValueError, orjson.JSONDecodeError) as exc:
            messages.error(request, f"Could not fork: INVALID_INPUT: {exc}")
        except ActionError as exc:
            messages.error(request, f"Could not fork: {exc}")
        else:
            messages.success(request, f"Created {fork.mode} {fork.run.run_id} from seq {fork.from_seq}.")
            return redirect("runs:detail", fork.run.run_id)
    membership = current_membership(request)
    try:
        seq = max(0, int(raw_seq))
    except ValueError:
        seq = 0
    return render(
        request,
        "runs/fork.html",
        {
            "run": run,
            "mode": "branch" if mode == "branch" else "replay",
            "seq": seq,
            "can_fork": bool(membership and membership.has_role(Role.OWNER)),
            "steps": [s["id"] for s in run.run_doc["workflowSnapshot"]["steps"]],
        },
    )


@login_required
@require_GET
def determinism(request: HttpRequest, run_id: str) -> HttpResponse:
    access = run_access(request, run_id)
    fork = RunFork.objects.select_related("run", "source").filter(run=access.run).first()
    report = determinism_report(fork) if fork is not None and fork.mode == "replay" else None
    return render(request, "runs/determinism.html", {"run": access.run, "fork": fork, "report": report})
