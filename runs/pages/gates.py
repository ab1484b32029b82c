"""Resolving a gate from the gate panel (htmx or plain form)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from runs import actions
from runs.engine import commands as cmd
from runs.models import Run
from runs.pages.access import run_write
from runs.pages.params import parse_json_field
from runs.partials import (
    gate_panel_context,
    graph_context,
)
from runs.permissions import Action
from runs.selectors import (
    run_state,
)
from runs.web import (
    actor_for,
)


@run_write(Action.RESOLVE_GATE)
def resolve_gate(request: HttpRequest, run: Run) -> HttpResponse:
    post = request.POST
    decision = post.get("decision", "")
    step_id = post.get("step_id", "")
    gate = post.get("gate", "")
    checkpoint = post.get("checkpoint") or None
    note = post.get("note", "").strip()[:4000] or None
    error = ""
    edit = None
    if decision not in ("approved", "rejected", "edited"):
        error = "Choose approve, reject or edit."
    elif decision == "edited" and not (post.get("edit_key") and post.get("edit_data", "").strip()):
        # "Approve with edits" records an edit: without one it would be an approval by another name
        error = (
            "Approve with edits needs an artifact and its new data (under “Edit an artifact with this "
            "decision”). To approve as it is, use Approve."
        )
    elif decision == "edited":
        data, error = parse_json_field(post.get("edit_data", ""))
        if not error:
            state = run_state(run)
            current = state.artifacts.get(post["edit_key"])
            type_id = post.get("edit_type") or (current or {}).get("typeId") or "json"
            edit = cmd.WriteArtifact(
                key=post["edit_key"],
                type_id=type_id,
                data=data,
                idempotency_key=post.get("idempotency_key") or None,
                step_id=step_id or None,
            )
    if not error:
        try:
            actions.do_command(
                workspace=run.workspace,
                run_id=run.run_id,
                command=cmd.ResolveGate(
                    step_id=step_id, gate=gate, decision=decision, note=note, checkpoint=checkpoint, edit=edit
                ),
                actor=actor_for(request),
            )
        except actions.ActionError as exc:
            error = f"{exc.code}: {exc.message}"
    run.refresh_from_db()
    state = run_state(run)
    if request.htmx:
        ctx = gate_panel_context(run, state, can_review=True, error=error)
        ctx["oob_parts"] = True
        ctx.update({"layout": graph_context(run, state)["layout"]})
        return render(request, "runs/gate_response.html", ctx)
    if error:
        messages.error(request, error)
    else:
        messages.success(request, f"Gate {gate} on {step_id}: {decision}.")
    return redirect(reverse("runs:detail", args=[run.run_id]) + "#gates")
