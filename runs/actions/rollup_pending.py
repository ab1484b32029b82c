"""The workspace rollup increments of one transaction, held until its end
(:func:`runs.actions.rollups.deferred`).

The workspace rollup rows (RunRollup, CostRollup, MetricRollup) are shared by every run of a
workspace that starts on the same day with the same workflow (OTLP's runs: one workflow, so a few
rows, one per shard). An increment locks its row until the transaction ends, so a writer that adds
to them early in a long transaction (a storer's batch: runs, events, traces) holds the other
writers of the workspace for the rest of it; and two writers that take the rows in different
orders (the runs' counters before their calls, or after) can deadlock. Measured with 2 OTLP storers
(bench/bench_otlp_streams.py): 20% of a storer's time waiting on RunRollup's rows, and 2 storers
slower than 1.

Inside a deferred block the hooks add to a :class:`Pending` instead of writing: increments summed
per key, then ONE write per table at the block's end, just before its commit, in one order
(RunRollup, CostRollup, MetricRollup; keys sorted within each). A hook called inside a nested
atomic block (a savepoint that may roll back on its own) writes at once, as outside any deferred
block: what is held here always commits or rolls back with the block that holds it. A deferred
block directly inside another hands what it held to the outer one when it succeeds (its savepoint
released), so a transaction of many such blocks (OTLP's runs one at a time) writes the rows once.

Only the workspace rows wait: a run's own rows (RunCostRollup, RunMetricRollup) belong to one run,
whose row the writer already holds locked, and are written at once.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

_local = threading.local()  # Django's connections are per thread, so is what waits for their commit


@dataclass
class Pending:
    depth: int  # how many atomic blocks deep the deferred block's own statements run
    runs: dict[int, dict[tuple, list[int]]] = field(default_factory=dict)  # workspace -> RunKey -> vector
    costs: dict[int, dict[tuple, list]] = field(default_factory=dict)  # workspace -> Key -> sums
    # (workspace, run day, key hash) -> [workflow, shard, metric key, count]
    metrics: dict[tuple, list] = field(default_factory=dict)

    def add_runs(self, workspace_id: int, counts: dict[Any, list[int]]) -> None:
        held = self.runs.setdefault(workspace_id, {})
        for key, vector in counts.items():
            _add(held, key, vector)

    def add_costs(self, workspace_id: int, deltas: dict[Any, list]) -> None:
        held = self.costs.setdefault(workspace_id, {})
        for key, sums in deltas.items():
            _add(held, key, sums)

    def merge(self, inner: Pending) -> None:
        """Take what a deferred block nested in this one held (once its savepoint is released)."""
        for workspace_id, counts in inner.runs.items():
            self.add_runs(workspace_id, counts)
        for workspace_id, deltas in inner.costs.items():
            self.add_costs(workspace_id, deltas)
        self.add_metrics(inner.metrics)

    def add_metrics(self, merged: dict[tuple, list]) -> None:
        for key, (workflow, shard, metric, count) in merged.items():
            held = self.metrics.get(key)
            if held is None:
                self.metrics[key] = [workflow, shard, metric, count]
            else:
                held[3] += count


def _add(held: dict, key: Any, values: list) -> None:
    mine = held.get(key)
    if mine is None:
        held[key] = list(values)  # a copy: the caller's list is not ours to change
    else:
        for i, value in enumerate(values):
            mine[i] += value


def pending() -> Pending | None:
    """Where a rollup hook adds its increments now: the innermost deferred block's :class:`Pending`
    when the hook runs at that block's own level, None (write at once) otherwise."""
    held: Pending | None = getattr(_local, "pending", None)
    if held is None or not connection.in_atomic_block or len(connection.savepoint_ids) != held.depth:
        return None
    return held


def enter() -> tuple[Pending, Pending | None]:
    """A new :class:`Pending` for a deferred block just entered (its atomic block open); returns it
    and the one it hides (given back to :func:`leave`)."""
    outer = getattr(_local, "pending", None)
    mine = Pending(depth=len(connection.savepoint_ids))
    _local.pending = mine
    return mine, outer


def leave(outer: Pending | None) -> None:
    _local.pending = outer
