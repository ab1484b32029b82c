"""What budgets apply: a workspace's monthly cap and spend, a run's budget and spend, the trail."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from runs.models import CostRollup, Run, Workspace
from runs.models_budgets import BudgetRecord, RunBudget, WorkflowBudget, WorkspaceBudget

# Rollup rows are keyed by the day their run started: a run started this long before the month
# and still calling is counted; older ones are not (the cap is a guard, not billing).
LOOKBACK_DAYS = 92


@dataclass(frozen=True)
class RunLimit:
    amount: Decimal
    currency: str
    source: str  # "run", "workflow", "workspace"


def settings_of(workspace: Workspace) -> WorkspaceBudget | None:
    return WorkspaceBudget.objects.filter(workspace=workspace).first()


def workflow_limits(workspace: Workspace) -> list[WorkflowBudget]:
    return list(WorkflowBudget.objects.filter(workspace=workspace).order_by("workflow_id"))


def month_start(today: date | None = None) -> date:
    today = today or datetime.now(tz=UTC).date()
    return today.replace(day=1)


def month_spend(workspace: Workspace, currency: str, *, today: date | None = None) -> Decimal:
    """The workspace's cost in ``currency`` of the calls made this UTC month (from the rollups)."""
    first = month_start(today)
    rows = CostRollup.objects.filter(
        workspace=workspace,
        run_day__gte=first - timedelta(days=LOOKBACK_DAYS),
        call_day__gte=first.isoformat(),
        currency=currency,
    ).values_list("cost", flat=True)  # decimal text (exact): added here, bounded by the labels x days
    return sum((Decimal(cost) for cost in rows), Decimal(0))


def run_limit(run: Run, budget: WorkspaceBudget | None = None) -> RunLimit | None:
    """The run's own budget, else its workflow's, else the workspace's default; None: no budget."""
    currency = budget.currency if budget is not None else "USD"
    own = RunBudget.objects.filter(run=run).values_list("run_limit", flat=True).first()
    if own is not None:
        return RunLimit(own, currency, "run")
    flow = (
        WorkflowBudget.objects.filter(workspace_id=run.workspace_id, workflow_id=run.workflow_id)
        .values_list("run_limit", flat=True)
        .first()
    )
    if flow is not None:
        return RunLimit(flow, currency, "workflow")
    if budget is not None and budget.run_default is not None:
        return RunLimit(budget.run_default, currency, "workspace")
    return None


def run_spend(run: Run, currency: str) -> Decimal:
    totals = run.cost_totals if isinstance(run.cost_totals, dict) else {}
    return Decimal(str(totals.get(currency) or 0))


def records(workspace: Workspace, *, run_id: str | None = None, limit: int = 50) -> list[BudgetRecord]:
    rows = BudgetRecord.objects.filter(workspace=workspace)
    if run_id is not None:
        rows = rows.filter(run_id=run_id)
    return list(rows.order_by("-at", "-pk")[:limit])
