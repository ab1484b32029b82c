"""bench_scale's COPY builder stores what the actions store (issue 29's documented equivalence check).

The same 48 runs (six of each of the 8 templates, same ids and start times: bench/scale_data.py) are made once through
the actions and once with COPY from templates; the rows the pages read must be equal: every column
of every run but its surrogate key and wall-clock stamps, every event (body byte for byte, the
sha256 of its canonical bytes), the rollups (to each other, shards summed since a shard is the
surrogate key modulo 4, and each to a recomputation from its events), and the inbox and the runs
list's search list the same runs. PostgreSQL only (COPY); small data, no timings."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.db import connection

from runs.actions import rollups
from runs.actions.workspaces import get_or_create_workspace
from runs.models import Event, Run
from runs.protocol.canonical import canonical_bytes, sha256_hex
from runs.protocol.values import loads
from runs.selectors import run_list as run_selectors

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import scale_data  # noqa: E402

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

COUNT = 48
NEWEST = datetime(2026, 11, 20, 12, 0, 0, tzinfo=UTC)
SPACING = 3 * 86400 / COUNT  # over three days: several run days and shards per key
WALL_CLOCK = {"id", "workspace_id", "created_at", "updated_at", "recorded_at"}


def _runs(workspace) -> dict[str, dict]:
    return {
        row["run_id"]: {k: v for k, v in row.items() if k not in WALL_CLOCK}
        for row in Run.objects.for_workspace(workspace).values()
    }


def _events(workspace) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    fields = [f for f in scale_data.EVENT_COLUMNS if f not in WALL_CLOCK | {"run_id"}]
    rows = Event.objects.filter(run__workspace=workspace).order_by("run__run_id", "seq")
    for run_id, *values in rows.values_list("run__run_id", *fields):
        body = values[fields.index("body")]
        out.setdefault(run_id, []).append((*values, sha256_hex(canonical_bytes(loads(body)))))
    return out


def _unsharded(workspace) -> tuple[dict, dict]:
    costs, counts = rollups.stored(workspace)
    out_costs: dict = {}
    for key, sums in costs.items():
        held = out_costs.setdefault((key[0], *key[2:]), [0] * len(sums))
        for i, value in enumerate(sums):
            held[i] += value
    out_counts: dict = {}
    for (day, workflow, version, _), sums in counts.items():
        held = out_counts.setdefault((day, workflow, version), [0, 0])
        held[0] += sums[0]
        held[1] += sums[1]
    return out_costs, out_counts


def _page_ids(workspace, **filters) -> list[str]:
    page, _ = run_selectors.runs_page(workspace, run_selectors.RunListFilters(**filters), limit=50)
    return [run.run_id for run in page]


def test_copy_builder_stores_what_the_actions_store():
    if connection.vendor != "postgresql":
        pytest.skip("the COPY builder is PostgreSQL's")
    by_actions = get_or_create_workspace("scale-actions")
    by_copy = get_or_create_workspace("scale-copy")
    templates = scale_data.make_templates(get_or_create_workspace("scale-templates"))
    scale_data.make_runs(by_actions, COUNT, NEWEST, SPACING, "s")
    events = scale_data.copy_runs(by_copy, COUNT, templates, NEWEST, SPACING, "s", chunk=64)

    assert Event.objects.filter(run__workspace=by_actions).count() == events
    mine, theirs = _runs(by_copy), _runs(by_actions)
    assert len(mine) == COUNT and mine.keys() == theirs.keys()
    for run_id, row in theirs.items():
        assert mine[run_id] == row, run_id
    mine_events, their_events = _events(by_copy), _events(by_actions)
    for run_id, rows in their_events.items():
        assert mine_events[run_id] == rows, run_id
    assert mine_events.keys() == their_events.keys()

    assert rollups.rollups_match(by_actions)
    assert rollups.rollups_match(by_copy)
    assert _unsharded(by_copy) == _unsharded(by_actions)
    assert _unsharded(by_copy)[1]  # something was counted

    inbox = [run_selectors.inbox_page(ws, limit=200)[0] for ws in (by_copy, by_actions)]
    assert [r.run_id for r in inbox[0]] == [r.run_id for r in inbox[1]] and inbox[0]
    for filters in (
        {},
        {"q": "invoice 701"},
        {"status": "running", "q": "invoice 401"},
        {"status": "cancelled"},
    ):
        assert _page_ids(by_copy, **filters) == _page_ids(by_actions, **filters), filters
