"""Resolving a gate from the gate panel or an inbox row (htmx or plain form): one view, one action."""

from __future__ import annotations

import json
from typing import Any

import jsonpatch
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from runs import actions
from runs.actions import budgets
from runs.actions.gatepolicy import do_decide_gate, do_raise_run_budget, do_stop_at_budget
from runs.actions.permissions import Action
from runs.engine import commands as cmd
from runs.models import Run
from runs.pages.access import run_write
from runs.pages.budgets import still_waiting
from runs.pages.inbox import inbox_row_context
from runs.pages.params import parse_json_field
from runs.selectors.gatepolicy import vote_words
from runs.selectors.run_list import pending_gate_count
from runs.selectors.runs import run_state
from runs.web.artifact_forms import schema_errors, schema_registry
from runs.web.gate_edit import FORM, gate_edit, posted_for, problems_in_words, read_gate_edit
from runs.web.partials import (
    gate_panel_context,
    graph_context,
)
from runs.web.request import (
    HtmxHttpRequest,
    actor_for,
)

FROM_INBOX = "inbox"  # the form's `return` field: answer with the inbox row, or back to the inbox


def edit_problems(type_id: str, data: object) -> str:
    """The edit's schema violations in words ("kind: This field cannot be empty."), "" when valid:
    what the artifact editor says, instead of the protocol's "INVALID_INPUT: rules.basic: ..."."""
    errors = schema_errors(schema_registry().get(type_id), data)
    said = [f"{e['path'].lstrip('/') or 'The data'}: {e['message']}" for e in errors[:5]]
    return " ".join(said)


def _form_edit(run: Run, post: Any, step_id: str) -> tuple[cmd.PatchArtifact | None, str]:
    """A posted schema form as the JSON Patch it makes to the version the form started from."""
    state = run_state(run)
    key = post.get("edit_key", "")
    current = state.artifacts.get(key)
    if current is None:
        return None, "Approve with edits needs an artifact (under “Edit an artifact with this decision”)."
    if not posted_for(post, key, int(current.get("version") or 0)):
        return None, (
            f"The form no longer matches {key} (now version {current.get('version')}): it shows the "
            "current version again; make the edit there."
        )
    data, errors = read_gate_edit(state, post)
    if errors:
        return None, problems_in_words(errors)
    patch = jsonpatch.make_patch(current.get("data"), data).patch
    if not patch:
        return None, "The form has no changes. To approve as it is, use Approve."
    return (
        cmd.PatchArtifact(
            key=key,
            from_version=current["version"],
            patch=patch,
            idempotency_key=post.get("idempotency_key") or None,
            step_id=step_id or None,
        ),
        "",
    )


def _json_edit(run: Run, post: Any, step_id: str) -> tuple[cmd.WriteArtifact | None, str]:
    """The JSON box's new data as a write of the artifact (checked against its schema first)."""
    if not (post.get("edit_key") and post.get("edit_data", "").strip()):
        # "Approve with edits" records an edit: without one it would be an approval by another name
        return None, (
            "Approve with edits needs an artifact and its new data (under “Edit an artifact with this "
            "decision”). To approve as it is, use Approve."
        )
    data, error = parse_json_field(post.get("edit_data", ""))
    if error:
        return None, error
    current = run_state(run).artifacts.get(post["edit_key"])
    type_id = post.get("edit_type") or (current or {}).get("typeId") or "json"
    problems = edit_problems(type_id, data)
    if problems:
        return None, problems
    return (
        cmd.WriteArtifact(
            key=post["edit_key"],
            type_id=type_id,
            data=data,
            idempotency_key=post.get("idempotency_key") or None,
            step_id=step_id or None,
        ),
        "",
    )


def decide_gate(request: HttpRequest, run: Run) -> str:
    """Parse a decision form and record it through the one write path (under the gate's policy:
    runs.actions.gatepolicy); "" or what went wrong. A vote that leaves the gate waiting for more
    approvers is said in ``request.gate_vote``."""
    post = request.POST
    decision = post.get("decision", "")
    step_id = post.get("step_id", "")
    gate = post.get("gate", "")
    checkpoint = post.get("checkpoint") or None
    note = post.get("note", "").strip()[:4000] or None
    edit: cmd.WriteArtifact | cmd.PatchArtifact | None = None
    if decision not in ("approved", "rejected", "edited"):
        return "Choose approve, reject or edit."
    if gate == budgets.CHECKPOINT and checkpoint == budgets.BUDGET_CHECKPOINT:
        return _decide_budget_gate(request, run, decision)
    if decision == "edited":
        edit, error = (
            _form_edit(run, post, step_id)
            if post.get("edit_editor") == FORM
            else _json_edit(run, post, step_id)
        )
        if error:
            return error
    try:
        outcome = do_decide_gate(
            workspace=run.workspace,
            run_id=run.run_id,
            step_id=step_id,
            gate=gate,
            decision=decision,
            note=note,
            checkpoint=checkpoint,
            edit=edit,
            actor=actor_for(request),
        )
    except actions.ActionError as exc:
        return f"{exc.message[:1].upper()}{exc.message[1:]} ({exc.code})"
    if not outcome.resolved and outcome.policy.needs_votes:
        request.gate_vote = vote_words(  # type: ignore[attr-defined]
            decision, len(outcome.approvals), outcome.policy.quorum
        )
    return ""


def _decide_budget_gate(request: HttpRequest, run: Run, decision: str) -> str:
    """The run's ``budget`` gate: an approval alone would only open it again at the next call (the
    limit is what the caller checks), so going on means raising the run's budget (the decision
    names the new limit); rejecting stops the run there. Both through runs.actions.budgets."""
    try:
        if decision == "rejected":
            stopped = do_stop_at_budget(workspace=run.workspace, run_id=run.run_id, actor=actor_for(request))
            if not stopped["stopped"]:  # the policy counts rejections: a vote, the gate still waits
                request.gate_vote = (  # type: ignore[attr-defined]
                    f"Your vote to stop is recorded: {stopped['rejections']} of {stopped['needed']} rejections."
                )
            return ""
        limit = request.POST.get("limit", "").strip()
        if decision != "approved" or not limit:
            return (
                "To let the run go on, name its new budget and press Raise and continue "
                f"({budgets.BUDGET_LIMIT_REQUIRED})."
            )
        raised = do_raise_run_budget(
            workspace=run.workspace, run_id=run.run_id, limit=limit, actor=actor_for(request)
        )
        if raised["resumed"]:
            request.gate_said = raised["note"] + "."  # type: ignore[attr-defined]
        else:  # one approval of a quorum: the gate still waits
            request.gate_vote = raised["note"] + "." + still_waiting(raised)  # type: ignore[attr-defined]
    except actions.ActionError as exc:
        return f"{exc.message[:1].upper()}{exc.message[1:]} ({exc.code})"
    return ""


@run_write(Action.RESOLVE_GATE)
def resolve_gate(request: HtmxHttpRequest, run: Run) -> HttpResponse:
    post = request.POST
    error = decide_gate(request, run)
    vote = getattr(request, "gate_vote", "")  # a vote that leaves the gate waiting for more
    decision, step_id, gate = post.get("decision", ""), post.get("step_id", ""), post.get("gate", "")
    run.refresh_from_db()
    from_inbox = post.get("return") == FROM_INBOX
    said = f"{decision.capitalize()}: {gate} on {step_id} of “{run.title or run.run_id}”."
    said = f"{said} {getattr(request, 'gate_said', '')}".rstrip()  # a raised budget names its limit
    if request.htmx and from_inbox:
        gate_doc = {"stepId": step_id, "gate": gate, "checkpoint": post.get("checkpoint") or None}
        # still pending (the decision was refused): the row keeps its reason and age
        gate_doc = next(
            (
                g
                for g in run_state(run).pending_gates()
                if (g["stepId"], g["gate"], g.get("checkpoint")) == tuple(gate_doc.values())
            ),
            gate_doc,
        )
        ctx = inbox_row_context(
            run,
            gate_doc,
            key=post.get("row_key", ""),
            can_review=True,
            username=request.user.get_username(),
            decided="" if error or vote else decision,
        )
        typed = {"typed_limit": post.get("limit", "")[:40]} if error else {}
        response = render(
            request, "runs/inbox.html#inbox_row", {**ctx, **typed, "row_error": error, "row_notice": vote}
        )
        if not error and not vote:
            # said once outside the table (the row may be refreshed away by the live inbox)
            # ASCII JSON (\u escapes): a header value must be Latin-1, a title may be anything
            # dispatched on <body> ("target"): the form that asked may be gone by the answer (a
            # live refresh morphed the row meanwhile) and an event on a detached node reaches no one
            detail = {"text": said, "pending": pending_gate_count(run.workspace), "target": "body"}
            response["HX-Trigger"] = json.dumps({"inbox:decided": detail}, ensure_ascii=True)
        return response
    if request.htmx:
        state = run_state(run)
        ctx = gate_panel_context(
            run,
            state,
            can_review=True,
            error=error,
            error_at=(step_id, gate, "edit" if decision == "edited" else ""),
            notice=vote,
            # a refused edit keeps what the person typed
            typed=post if error and decision == "edited" else None,
        )
        ctx["oob_parts"] = True
        ctx.update({"layout": graph_context(run, state)["layout"]})
        return render(request, "runs/gate_response.html", ctx)
    if error:
        messages.error(request, error)
    elif vote:
        messages.info(request, vote)
    else:
        messages.success(request, said)
    if from_inbox:
        return redirect("runs:inbox")
    return redirect(reverse("runs:detail", args=[run.run_id]) + "#gates")


@run_write(Action.RESOLVE_GATE)
def check_gate_edit(request: HtmxHttpRequest, run: Run) -> HttpResponse:
    """The gate's artifact edit again, checked as the decision would check it (nothing recorded):
    htmx posts the gate's form here when a field changes or another artifact is chosen."""
    post = request.POST
    state = run_state(run)
    try:
        slot = max(1, min(int(post.get("edit_slot", "1")), 10_000))
    except ValueError:
        slot = 1
    key = post.get("edit_key", "")
    edit = gate_edit(state, key, prefix=f"g{slot}-", post=post)
    text = edit.text if edit is not None else ""
    if edit is not None and edit.form is None and post.get("edit_data", "").strip():
        text = post.get("edit_data", "")
        data, error = parse_json_field(text)
        problem = error or edit_problems(edit.type_id, data)
        edit.errors = [problem] if problem else []
    if edit is not None and edit.form is not None:
        for f in edit.form.walk():
            f.autofocus = False  # checked while typing: the focus stays where the reviewer is
    ctx = {"run": run, "artifact_keys": list(state.artifacts), "slot": slot, "edit": edit}
    return render(request, "runs/_gate_edit.html", {**ctx, "edit_key": key, "edit_text": text})
