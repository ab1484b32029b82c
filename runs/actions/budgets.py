"""Budgets that stop spend (the one write path for budget settings, pauses, raises and refusals).

* A workspace's **monthly cap** (in its currency): past it, new calls Workbench itself would make
  (playground sends, experiments' and judges' model calls) are refused with ``BUDGET_EXCEEDED`` in
  words. Runs that report their own calls (the SDK, OTLP) are recorded as always and raise an
  alert: Workbench does not make those calls and cannot stop them.
* A **run budget** (the run's own, else its workflow's, else the workspace's default): before a
  model call, a run whose spend plus the call's estimate (the run's average call so far) would pass
  its budget pauses at a CHECKPOINT gate named ``budget``; a person raises the limit (the decision
  names the new limit) or stops the run there.

Every setting, pause, raise, stop, refusal and alert is a :class:`BudgetRecord` (the workspace's
budget trail); pauses and raises are also the run's own gate events.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import transaction
from django.utils import timezone

from runs.actions.core import ActionError, AppendResult, load_state
from runs.actions.outbox import BUDGET_EXCEEDED as BUDGET_EXCEEDED_EVENT
from runs.actions.outbox import run_links, site_url, tell_owners
from runs.actions.runs import do_command
from runs.engine import commands as cmd
from runs.engine.state import gate_slot
from runs.models import Event, Run, Workspace
from runs.models_budgets import BudgetRecord, RunBudget, WorkflowBudget, WorkspaceBudget
from runs.protocol.errors import ErrorCode
from runs.selectors.budgets import month_spend, month_start, run_limit, run_spend, settings_of
from runs.selectors.runs import get_run

BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
# An approval of the ``budget`` gate without a new limit (REST, MCP, Slack, e-mail links): it would
# only let the caller through to pause again at its next call, so it is refused (nothing written).
BUDGET_LIMIT_REQUIRED = "BUDGET_LIMIT_REQUIRED"
BUDGET_CHECKPOINT = "budget"
CHECKPOINT = "CHECKPOINT"
SELF_REPORTED = (
    "Runs that report their own calls (the SDK, OTLP) are recorded as always: Workbench does not "
    "make those calls, so it cannot stop them."
)


def is_budget_gate(gate: str | None, checkpoint: str | None) -> bool:
    """Whether a gate is a run's ``budget`` checkpoint (it goes on only with a raised budget)."""
    return gate == CHECKPOINT and checkpoint == BUDGET_CHECKPOINT


def limit_required(run_id: str) -> ActionError:
    """The refusal of an approval of the ``budget`` gate that names no new budget."""
    return ActionError(
        BUDGET_LIMIT_REQUIRED,
        "the run's budget gate goes on only with a new budget: raise it (POST "
        f'/api/runs/{run_id}/budget with {{"limit": "0.05"}}, or on the run\'s page), or reject '
        "the gate to stop the run at its budget; an approval alone would pause it again at its next call",
        "decision",
    )


def money(amount: Decimal, currency: str) -> str:
    return f"{currency} {amount.quantize(Decimal('0.000001')).normalize():f}"


def amount_of(value: Any, field: str, *, allow_none: bool = True) -> Decimal | None:
    """A limit from a form or JSON: a non-negative decimal (text or number); "" / None: no limit."""
    if value is None or (isinstance(value, str) and not value.strip()):
        if allow_none:
            return None
        raise ActionError(ErrorCode.INVALID_INPUT, f"{field} is required", field)
    if isinstance(value, bool):
        raise ActionError(ErrorCode.INVALID_INPUT, f"{field} must be an amount, not {value}", field)
    try:
        amount = Decimal(str(value).strip())
    except InvalidOperation:
        raise ActionError(
            ErrorCode.INVALID_INPUT, f"{field} must be an amount such as 12.50", field
        ) from None
    if not amount.is_finite() or amount < 0 or amount >= Decimal("1e8"):
        raise ActionError(ErrorCode.INVALID_INPUT, f"{field} must be between 0 and 99999999.99", field)
    return amount.quantize(Decimal("0.000001"))


def record(
    workspace: Workspace, kind: str, message: str, *, run_id: str = "", actor: str = ""
) -> BudgetRecord:
    return BudgetRecord.objects.create(
        workspace=workspace, kind=kind, message=message, run_id=run_id, actor=actor
    )


# ---------------------------------------------------------------------------------------------
# Settings


def do_set_budgets(
    *,
    workspace: Workspace,
    monthly_cap: Any,
    run_default: Any,
    currency: Any = "USD",
    workflows: dict[str, Any] | None = None,
    user: Any = None,
    actor: str = "",
) -> WorkspaceBudget:
    """Set the monthly cap, the default run budget and the per-workflow run budgets (a workflow
    given None loses its own budget). Refused whole on any bad amount."""
    cap = amount_of(monthly_cap, "monthlyCap")
    default = amount_of(run_default, "runDefault")
    cur = str(currency or "USD").strip().upper()
    if not cur.isalpha() or not 3 <= len(cur) <= 8:
        raise ActionError(ErrorCode.INVALID_INPUT, "currency must be a code such as USD or EUR", "currency")
    flows: dict[str, Decimal | None] = {}
    for workflow_id, value in (workflows or {}).items():
        if not isinstance(workflow_id, str) or not workflow_id.strip() or len(workflow_id) > 200:
            raise ActionError(ErrorCode.INVALID_INPUT, "a workflow id is 1..200 characters", "workflows")
        flows[workflow_id.strip()] = amount_of(value, f"workflows.{workflow_id}")
    with transaction.atomic():
        budget, _ = WorkspaceBudget.objects.update_or_create(
            workspace=workspace,
            defaults={
                "monthly_cap": cap,
                "run_default": default,
                "currency": cur,
                "updated_at": timezone.now(),
                "updated_by": user if getattr(user, "is_authenticated", False) else None,
            },
        )
        for workflow_id, limit in flows.items():
            if limit is None:
                WorkflowBudget.objects.filter(workspace=workspace, workflow_id=workflow_id).delete()
            else:
                WorkflowBudget.objects.update_or_create(
                    workspace=workspace, workflow_id=workflow_id, defaults={"run_limit": limit}
                )
        words = [
            f"monthly cap {money(cap, cur) if cap is not None else 'none'}",
            f"run budget by default {money(default, cur) if default is not None else 'none'}",
        ]
        words += [
            f"runs of {w}: {money(v, cur) if v is not None else 'the default'}"
            for w, v in sorted(flows.items())
        ]
        record(workspace, "settings", "Budgets set: " + "; ".join(words) + ".", actor=actor)
    return budget


# ---------------------------------------------------------------------------------------------
# The workspace's monthly cap


def past_cap(workspace: Workspace) -> tuple[Decimal, Decimal, str] | None:
    """(spent this month, cap, currency) when the workspace is at or past its cap; else None."""
    budget = settings_of(workspace)
    if budget is None or budget.monthly_cap is None:
        return None
    spent = month_spend(workspace, budget.currency)
    if spent < budget.monthly_cap:
        return None
    return spent, budget.monthly_cap, budget.currency


def refuse_past_cap(workspace: Workspace, *, what: str, actor: str = "") -> None:
    """Refuse a call Workbench would make (``what``: "this playground send") when the workspace is
    past its monthly cap: ``BUDGET_EXCEEDED`` in words, recorded in the budget trail."""
    over = past_cap(workspace)
    if over is None:
        return
    spent, cap, currency = over
    message = (
        f"The workspace has spent {money(spent, currency)} this month, at or past its monthly cap of "
        f"{money(cap, currency)}: {what} is refused and no provider was called. An admin can raise "
        "the cap under Settings, Budgets."
    )
    record(workspace, "refused", message, actor=actor)
    raise ActionError(BUDGET_EXCEEDED, message, "budget")


def alert_if_past_cap(workspace: Workspace, *, run_id: str = "", source: str = "") -> bool:
    """A run that reports its own calls spent past the cap: one alert per month, in the trail and
    through the outbox (``budget.exceeded`` to the hooks that chose it, Slack hooks included, and
    an e-mail to each owner), in one transaction. Its calls are recorded as always."""
    over = past_cap(workspace)
    if over is None:
        return False
    first = month_start()
    if BudgetRecord.objects.filter(workspace=workspace, kind="alert", at__date__gte=first).exists():
        return True
    spent, cap, currency = over
    message = (
        f"The workspace has spent {money(spent, currency)} this month, past its monthly cap of "
        f"{money(cap, currency)} ({source or 'a run'} reported calls). {SELF_REPORTED}"
    )
    with transaction.atomic():
        # the workspace's row locked: two ingests past the cap at once alert once
        Workspace.objects.select_for_update().filter(pk=workspace.pk).first()
        if BudgetRecord.objects.filter(workspace=workspace, kind="alert", at__date__gte=first).exists():
            return True
        record(workspace, "alert", message, run_id=run_id)
        tell_owners(
            workspace,
            BUDGET_EXCEEDED_EVENT,
            {
                "budget": {
                    "spent": money(spent, currency),
                    "cap": money(cap, currency),
                    "currency": currency,
                    "month": first.isoformat()[:7],
                    "url": f"{site_url()}/settings/budgets/",
                },
                "source": source or "a run",
                "reason": message,
                **({"run": {"id": run_id, **run_links(run_id)}} if run_id else {}),
            },
        )
    return True


def alert_after_reported(workspace: Workspace, events: Iterable[dict], *, source: str) -> bool:
    """After a run reported calls it made itself (the SDK's events over REST, OTLP spans): when one
    was priced and the workspace is past its cap, the month's alert (:func:`alert_if_past_cap`).
    Nothing is refused: Workbench did not make those calls. Unpriced events cost no query."""
    priced = next((e for e in events if e.get("type") == "model_io" and e.get("cost")), None)
    if priced is None:
        return False
    return alert_if_past_cap(workspace, run_id=str(priced.get("runId") or ""), source=source)


# ---------------------------------------------------------------------------------------------
# Run budgets: the ``budget`` gate


def _open_budget_gate(run: Run) -> tuple[str, int] | None:
    """(step id, seq of its request) of the run's open ``budget`` gate, if one waits."""
    state = load_state(run)
    slot = gate_slot(CHECKPOINT, BUDGET_CHECKPOINT)
    for step_id, slots in state.open_gates.items():
        if slot in slots:
            seq = (
                Event.objects.filter(run=run, type="human_gate_requested", step_id=step_id)
                .order_by("-seq")
                .values_list("seq", flat=True)
                .first()
            )
            return step_id, int(seq or 0)
    return None


def _within(spent: Decimal, estimate: Decimal, limit: Decimal) -> bool:
    """Whether the next call (about ``estimate``) keeps the run within its budget."""
    return spent < limit and spent + estimate <= limit


def over_budget(run: Run) -> bool:
    """Whether the run's next model call would pass its budget now (what the caller's check would
    pause at): an approval of its ``budget`` gate goes on only once this is False."""
    limit = run_limit(run, settings_of(run.workspace))
    if limit is None:
        return False
    spent = run_spend(run, limit.currency)
    return not _within(spent, spent / run.model_calls if run.model_calls else Decimal(0), limit.amount)


def check_run_budget(
    *,
    workspace: Workspace,
    run_id: str,
    step_id: str | None,
    actor: str = "",
    self_reported: bool = True,
    what: str = "",
) -> dict[str, Any]:
    """Before a model call of the run: ``{"allowed": True, ...}``, or the run pauses at its
    ``budget`` gate (``{"allowed": False, "gate": {stepId, gate, checkpoint, afterSeq}}``): the
    caller waits for a person's decision and calls nothing meanwhile. ``self_reported``: the run
    makes its own calls (the SDK), so past the monthly cap it raises an alert; Workbench's own calls
    (an experiment's fork) are refused at the cap instead (runs.execution.model_calls). A call that
    names no step (``step_id`` None) has nowhere to pause: it is refused, recorded in the trail
    (``what`` names it in the message: "this playground send")."""
    run = get_run(workspace, run_id)
    budget = settings_of(workspace)
    answer: dict[str, Any] = {"runId": run.run_id, "allowed": True, "limit": None}
    if (
        self_reported
        and budget is not None
        and budget.monthly_cap is not None
        and alert_if_past_cap(workspace, run_id=run.run_id, source="the SDK")
    ):
        answer["workspaceCap"] = f"The workspace is past its monthly cap. {SELF_REPORTED}"
    limit = run_limit(run, budget)
    if limit is None:
        return answer
    spent = run_spend(run, limit.currency)
    estimate = spent / run.model_calls if run.model_calls else Decimal(0)
    answer.update(
        limit=f"{limit.amount:f}",
        spent=f"{spent:f}",
        currency=limit.currency,
        source=limit.source,
        estimate=f"{estimate:f}",
    )
    within = _within(spent, estimate, limit.amount)
    # a waiting budget gate holds every call until it is decided, even once the limit allows it
    # (a raise that is one approval of a quorum: runs.actions.gatepolicy.do_raise_run_budget)
    waiting = _open_budget_gate(run) if run.pending_gates else None
    if within and waiting is None:
        return answer
    why = (
        f"The run has spent {money(spent, limit.currency)} of its budget of {money(limit.amount, limit.currency)}"
        f" ({limit.source} budget); the next model call (about {money(estimate, limit.currency)}) would pass "
        "it. Nothing is called until a person allows more."
        if not within
        else f"The run's budget gate waits for its decision (its budget is now {money(limit.amount, limit.currency)}): "
        "nothing is called until the people its policy asks for have approved."
    )
    answer.update(allowed=False, message=why)
    if waiting is None:
        if not step_id:
            message = (
                f"The run has spent {money(spent, limit.currency)} of its budget of "
                f"{money(limit.amount, limit.currency)} ({limit.source} budget); the next model call "
                f"(about {money(estimate, limit.currency)}) would pass it: {what or 'the call'} is refused "
                "and no provider was called. Raise the run's budget under Settings, Budgets."
            )
            record(workspace, "refused", message, run_id=run.run_id, actor=actor)
            answer["message"], answer["gate"] = message, None
            return answer
        result = do_command(
            workspace=workspace,
            run_id=run.run_id,
            command=cmd.RequestGate(
                step_id=step_id, gate=CHECKPOINT, reason=why, checkpoint=BUDGET_CHECKPOINT
            ),
            actor=actor,
        )
        record(workspace, "paused", why, run_id=run.run_id, actor=actor)
        waiting = (step_id, result.last_seq)
    answer["gate"] = {
        "stepId": waiting[0],
        "gate": CHECKPOINT,
        "checkpoint": BUDGET_CHECKPOINT,
        "afterSeq": waiting[1],
    }
    return answer


def refuse_over_run_budget(*, workspace: Workspace, run_id: str, what: str, actor: str = "") -> None:
    """Before a call Workbench makes for a caller that cannot wait at a gate (a playground send, a
    judge's call): a run whose spend plus its average call would pass its run budget is refused
    with ``BUDGET_EXCEEDED`` in words, recorded in the budget trail; no budget, nothing asked."""
    answer = check_run_budget(
        workspace=workspace, run_id=run_id, step_id=None, actor=actor, self_reported=False, what=what
    )
    if not answer["allowed"]:
        raise ActionError(BUDGET_EXCEEDED, answer["message"], "budget")


def do_set_run_budget(
    *,
    workspace: Workspace,
    run_id: str,
    limit: Any,
    actor: str = "",
    decide: bool = True,
    channel: str = "page",
) -> dict[str, Any]:
    """Set (or raise) a run's budget; an open ``budget`` gate is approved with a decision that names
    the new limit, and the paused caller goes on. ``decide=False``: the limit only (the gate's
    policy counts the raise as one approval: runs.actions.gatepolicy.do_raise_run_budget)."""
    amount = amount_of(limit, "limit", allow_none=False)
    assert amount is not None
    run = get_run(workspace, run_id)
    budget = settings_of(workspace)
    before = run_limit(run, budget)
    currency = budget.currency if budget is not None else "USD"
    was = money(before.amount, currency) if before is not None else "none"
    note = f"Budget raised to {money(amount, currency)} (was {was})" + (f" by {actor}" if actor else "")
    with transaction.atomic():
        RunBudget.objects.update_or_create(
            run=run, defaults={"run_limit": amount, "updated_at": timezone.now()}
        )
        waiting = _open_budget_gate(run) if decide else None
        if waiting is not None:
            _decide_budget_gate(workspace, run, waiting[0], "approved", note, actor, channel)
        record(workspace, "raised", note + ".", run_id=run.run_id, actor=actor)
    return {
        "runId": run.run_id,
        "limit": f"{amount:f}",
        "currency": currency,
        "note": note,
        "resumed": waiting is not None,
    }


def _decide_budget_gate(
    workspace: Workspace,
    run: Run,
    step_id: str,
    decision: str,
    note: str,
    actor: str,
    channel: str = "page",
) -> AppendResult:
    """Resolve the run's open ``budget`` checkpoint (raise: approved; stop: rejected)."""
    return do_command(
        workspace=workspace,
        run_id=run.run_id,
        command=cmd.ResolveGate(
            step_id=step_id, gate=CHECKPOINT, decision=decision, note=note, checkpoint=BUDGET_CHECKPOINT
        ),
        actor=actor,
        channel=channel,
    )


def stop_words(actor: str, note: str | None = None) -> str:
    """The note of a stop at the budget gate (the person's words after ours)."""
    return "Stopped at its budget" + (f" by {actor}" if actor else "") + (f": {note}" if note else "")


def record_stop(workspace: Workspace, run_id: str, actor: str) -> None:
    """The budget trail's line of a run stopped at its budget gate."""
    record(workspace, "stopped", stop_words(actor) + ".", run_id=run_id, actor=actor)


def stop_at_budget(
    *, workspace: Workspace, run_id: str, actor: str = "", note: str | None = None, channel: str = "page"
) -> AppendResult:
    """Reject the run's open ``budget`` gate (``note``: the person's words, after ours); the
    events written. Refused with INVALID_STATE_TRANSITION when no budget gate waits. (A gate whose
    policy counts rejections is decided through runs.actions.gatepolicy.do_decide_gate.)"""
    run = get_run(workspace, run_id)
    waiting = _open_budget_gate(run)
    if waiting is None:
        raise ActionError(ErrorCode.INVALID_STATE_TRANSITION, "no budget gate waits on this run", "budget")
    with transaction.atomic():
        result = _decide_budget_gate(
            workspace, run, waiting[0], "rejected", stop_words(actor, note), actor, channel
        )
        record_stop(workspace, run.run_id, actor)
    return result
