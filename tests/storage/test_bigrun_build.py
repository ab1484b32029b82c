"""bench_bigrun's builder stores what the actions store (issue 29: the ten-million-event run).

The same run (head, 12 blocks of 100 events, tail: bench/bigrun_data.py) is made once through the
actions and once with its blocks copied in SQL from a template block and replayed (fold, snapshots,
rollups); the two must store equal run rows, events (every column, bodies byte for byte), snapshots,
artifact versions, workspace and per-run cost rollups, export byte-identical bundles that verify,
and the copy's projection must be the fold of its events. PostgreSQL only (the copy is SQL); small
data, no timings."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from django.db import connection

from runs.actions import rollups
from runs.actions.workspaces import get_or_create_workspace

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bigrun_data as bd  # noqa: E402

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def test_a_copied_run_stores_what_the_actions_store() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the copy is PostgreSQL SQL")
    template = bd.make_run(get_or_create_workspace("bigrun-template"), 1)
    made = bd.make_run(get_or_create_workspace("bigrun-made"), 12)
    copied = bd.copy_run(get_or_create_workspace("bigrun-copied"), template, 12)
    assert made.last_seq == copied.last_seq == 12 * bd.BLOCK + 10
    assert made.pending_gates == 1 and made.model_calls == 12 * bd.ITEMS
    assert bd.compare(made, copied) == []
    assert rollups.rollups_match(copied.workspace) and rollups.stored_run_calls(copied) != {}
