"""Rule sets of a run: toggle, reorder, edit payloads."""

from __future__ import annotations

import orjson
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse

from runs import actions
from runs.actions.permissions import Action
from runs.engine import commands as cmd
from runs.engine.rules import DIRECTIONS, edit_rule, move_rule, ordered_rules, toggle_rule
from runs.pages.access import RunAccess, run_page
from runs.pages.params import parse_json_field
from runs.selectors.runs import (
    run_state,
)
from runs.web.artifact_forms import (
    schema_errors,
    schema_registry,
)
from runs.web.request import (
    actor_for,
    require_action,
)


def rules_context(
    access: RunAccess, *, errors: dict[str, str] | None = None, texts: dict[str, str] | None = None
):
    state = run_state(access.run)
    rule_sets = []
    for rs in state.rule_sets.values():
        rules = []
        for rule in ordered_rules(list(rs.get("rules", []))):
            token = f"{rs['id']}::{rule.get('id')}"
            rules.append(
                {
                    "rule": rule,
                    "token": token,
                    "text": (texts or {}).get(token)
                    or orjson.dumps(rule.get("payload"), option=orjson.OPT_INDENT_2).decode(),
                    "error": (errors or {}).get(token, ""),
                }
            )
        rule_sets.append(
            {"set": rs, "rules": rules, "schema_known": schema_registry().has(rs.get("ruleSchemaId", ""))}
        )
    return {
        "run": access.run,
        "url_id": access.url_id,
        "demo": access.demo,
        "can_edit": access.can_review and not access.run.is_finished,
        "rule_sets": rule_sets,
        "nav_active": "runs",
        "detail_url": reverse("runs:demo")
        if access.demo
        else reverse("runs:detail", args=[access.run.run_id]),
    }


@run_page
def rules(request: HttpRequest, access: RunAccess) -> HttpResponse:
    if request.method != "POST":
        return render(request, "runs/rules.html", rules_context(access))
    if access.demo or not request.user.is_authenticated:
        raise Http404("read-only")
    require_action(request, Action.EDIT_RULES)
    run = access.run
    post = request.POST
    rs_id, rule_id, op = post.get("rule_set", ""), post.get("rule", ""), post.get("op", "")
    state = run_state(run)
    current = state.rule_sets.get(rs_id)
    if current is None:
        raise Http404("no such rule set")
    if not any(r.get("id") == rule_id for r in current.get("rules", [])):
        raise Http404("no such rule")
    token = f"{rs_id}::{rule_id}"
    if op == "toggle":
        new_set = toggle_rule(current, rule_id)
    elif op in DIRECTIONS:
        new_set = move_rule(current, rule_id, op)
    elif op == "edit":
        payload, problem = parse_json_field(post.get("payload", ""))
        if not problem:
            schema_id = current.get("ruleSchemaId", "")
            errs = schema_errors(schema_registry().get(schema_id), payload)
            if errs:
                problem = "; ".join(f"{e['path']}: {e['message']}" for e in errs[:5])
        if problem:
            ctx = rules_context(access, errors={token: problem}, texts={token: post.get("payload", "")})
            return render(request, "runs/rules.html", ctx, status=422)
        new_set = edit_rule(current, rule_id, payload=payload, label=post.get("label"))
    else:
        return HttpResponseBadRequest("unknown operation")
    try:
        actions.do_command(
            workspace=run.workspace,
            run_id=run.run_id,
            command=cmd.ChangeRuleSet(rule_set=new_set),
            actor=actor_for(request),
        )
    except actions.ActionError as exc:
        ctx = rules_context(access, errors={token: f"{exc.code}: {exc.message}"})
        return render(request, "runs/rules.html", ctx, status=422)
    messages.success(request, f"Rule set {rs_id} saved.")
    return redirect(reverse("runs:rules", args=[run.run_id]) + f"#rule-{rule_id}")
