"""How the rollup tables file a run (runs.actions.rollups, runs.actions.rollup_metrics): its
start day, its shard, its workflow and subject labels, and label columns spelt as the database
holds them (runs.fields on PostgreSQL).
"""

from __future__ import annotations

from datetime import UTC, date

from django.db import connection

from runs.fields import from_column, to_column
from runs.models import Run

# Concurrent writers of one workspace spread over this many rows per key (by run pk).
ROLLUP_SHARDS = 4


def run_day(run: Run) -> date:
    """The UTC day the run started: the day the workspace ledger files it under."""
    return run.started_at.astimezone(UTC).date()


def run_labels(run: Run) -> tuple[date, int, str, str, str, str]:
    subject = run.subject if isinstance(run.subject, dict) else {}

    def text(name: str) -> str:
        value = subject.get(name)
        return value if isinstance(value, str) else ""

    return (
        run_day(run),
        run.pk % ROLLUP_SHARDS,
        run.workflow_id or "",
        text("userId"),
        text("tenantId"),
        text("planId"),
    )


def spell(text: str) -> str:
    return to_column(text) if connection.vendor == "postgresql" else text


def read_label(text: str) -> str:
    """A label column's value as the protocol string it holds."""
    return from_column(text) if connection.vendor == "postgresql" else text


# the run columns the rollups read of each run (what a recomputation loads)
RUN_COLUMNS = (
    "pk",
    "workspace_id",
    "started_at",
    "ended_at",
    "subject",
    "workflow_id",
    "workflow_version",
    "status",
    "pending_gates",
)
