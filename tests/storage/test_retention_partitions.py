"""PostgreSQL: retention drops whole event partitions (runs.actions.partitions) and keeps every run
the policy keeps intact and verifiable; a partition holding a kept run is not dropped, its other
runs are purged in batches. Signed bundles exported before the drop still verify afterwards (they
are self-contained; the signing keys are not touched by retention)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from runs import actions
from runs.actions import partitions, rollups
from runs.actions.retention import do_prune_runs
from runs.actions.signing import do_export_bundle
from runs.actions.workspaces import get_or_create_workspace
from runs.engine import commands as c
from runs.models import Event, Run, RunRollup, SigningKey
from runs.protocol.bundle import check_bundle
from runs.protocol.signing import load_keys, verify_attestations
from runs.selectors.signing import jwks_document, validity_document
from tests.conftest import LINEAR_WORKFLOW
from tests.storage.test_retention import _imported, _rollups

pytestmark = [
    pytest.mark.django_db(transaction=True),  # DETACH ... CONCURRENTLY runs outside a transaction
    pytest.mark.skipif(connection.vendor != "postgresql", reason="partitions are PostgreSQL's"),
]

LONG_AGO = timedelta(days=100)


def _parts() -> dict[str, partitions.Partition]:
    with connection.cursor() as cursor:
        return {p.name: p for p in partitions.partitions(cursor)}


def _range_of(run: Run) -> str:
    return next(name for name, part in _parts().items() if part.holds(run.pk))


def _next_month() -> None:
    """The maintenance a month later: new runs get keys in a new range."""
    partitions.ensure_partitions(now=timezone.now() + timedelta(days=40))


def _verify(signed, keys) -> None:
    assert check_bundle(signed.data).ok  # the bytes as they left: integrity hash
    assert verify_attestations(signed.bundle, keys).ok


def _run(tmp_path, slug: str, events: int) -> Run:
    """An imported, completed run in a workspace of its own (the bundles share their run id)."""
    return _imported(tmp_path, get_or_create_workspace(slug), events)


def _cancelled(ws, run_id: str) -> Run:
    actions.do_start_run(workspace=ws, workflow=dict(LINEAR_WORKFLOW), run_id=run_id, actor="user:a")
    actions.do_command(workspace=ws, run_id=run_id, command=c.CancelRun(reason="done"), actor="user:a")
    return Run.unscoped.get(workspace=ws, run_id=run_id)


def _waiting(ws, run_id: str) -> Run:
    actions.do_start_run(workspace=ws, workflow=dict(LINEAR_WORKFLOW), run_id=run_id, actor="user:a")
    actions.do_commands(
        workspace=ws,
        run_id=run_id,
        commands=[c.BeginStep(step_id="parse"), c.CompleteStep(step_id="parse")],
        actor="user:a",
    )
    return Run.unscoped.get(workspace=ws, run_id=run_id)


def test_a_prune_drops_whole_partitions_and_keeps_every_kept_run(tmp_path) -> None:
    assert partitions.partitioned()
    ws = get_or_create_workspace("ret")
    # range 1: an old run and a run waiting at its gate (started long ago): kept whole
    old_a = _run(tmp_path, "old-a", 120)
    gate = _waiting(ws, "waiting-at-gate")
    _next_month()
    # range 2: an old run and a run that ended now (inside the policy): kept whole
    old_b = _run(tmp_path, "old-b", 120)
    recent = _cancelled(get_or_create_workspace("recent"), "ended-recently")
    _next_month()
    # range 3: old runs only: dropped whole
    old_c, old_d = _run(tmp_path, "old-c", 150), _run(tmp_path, "old-d", 90)
    _next_month()  # the sequence leaves range 3: it is closed
    ranges = [_range_of(r) for r in (old_a, gate, old_b, recent, old_c, old_d)]
    assert ranges[0] == ranges[1] != ranges[2] == ranges[3] != ranges[4] == ranges[5] != ranges[0]
    # (the imported runs ended when their bundle says: months ago; no column is changed behind the
    # rollups' back, so that they must still match a recomputation after the prune)
    assert all(r.ended_at < timezone.now() - LONG_AGO for r in (old_a, old_b, old_c, old_d))
    kept = [Run.unscoped.get(pk=gate.pk), Run.unscoped.get(pk=recent.pk)]
    before = {
        run.pk: list(Event.objects.filter(run=run).order_by("seq").values_list("seq", "body")) for run in kept
    }
    assert kept[0].pending_gates == 1 and kept[1].status == "cancelled" and before[recent.pk]
    # every run's signed bundle, exported before the prune, and the public keys as published then
    signed = {run.pk: do_export_bundle(run, exported_by="cli:t") for run in [*kept, old_a, old_c]}
    keys = load_keys(jwks_document(), validity_document())
    key_rows = SigningKey.objects.count()
    counted = _rollups(get_or_create_workspace("old-c"))

    report = do_prune_runs(before=timezone.now() - timedelta(days=30), batch=50)

    assert ranges[4] in report.partitions_dropped and ranges[0] not in report.partitions_dropped
    assert ranges[4] not in _parts() and ranges[0] in _parts() and ranges[2] in _parts()
    assert (
        report.runs == 4 and not Run.unscoped.filter(pk__in=[old_a.pk, old_b.pk, old_c.pk, old_d.pk]).exists()
    )
    assert not Event.objects.filter(run_id__in=[old_a.pk, old_b.pk, old_c.pk, old_d.pk]).exists()
    # the rollups: the dropped runs left them (one write per workspace), the kept runs' still count
    for slug in ("old-a", "old-b", "old-c", "old-d", "recent", "ret"):
        assert rollups.rollups_match(get_or_create_workspace(slug)), slug
    assert _rollups(get_or_create_workspace("old-c")) == [] != counted  # its model calls went
    assert not RunRollup.objects.filter(workspace__slug__in=["old-c", "old-d"], runs__gt=0).exists()
    # the kept runs: every event, as it was; their bundles export and verify as before
    for run in kept:
        assert (
            list(Event.objects.filter(run=run).order_by("seq").values_list("seq", "body")) == before[run.pk]
        )
        again = do_export_bundle(Run.unscoped.get(pk=run.pk), exported_by="cli:t")
        assert again.bundle["trace"] == signed[run.pk].bundle["trace"]
        _verify(again, keys)
    # the deleted runs' bundles verify with the bundle and the public keys alone; no key was deleted
    for run in (old_a, old_c):
        _verify(signed[run.pk], keys)
    assert SigningKey.objects.count() == key_rows
    _verify(signed[old_c.pk], load_keys(jwks_document(), validity_document()))
    # new runs still land in a partition and read back
    fresh = _run(tmp_path, "fresh", 30)
    assert Event.objects.filter(run=fresh).count() == 30 and _range_of(fresh) in _parts()


def test_the_maintenance_keeps_ranges_ahead_and_finishes_an_interrupted_drop() -> None:
    partitions.ensure_partitions()
    with connection.cursor() as cursor:
        key = partitions.next_key(cursor)
        above = [p for p in partitions.partitions(cursor) if p.low is not None and p.low > key]
        assert len(above) >= partitions.AHEAD
        top = max(p.high for p in partitions.partitions(cursor) if p.high is not None)
        # a range detached but not dropped (a drop interrupted between its two statements)
        leftover = partitions.Partition(f"{partitions.PREFIX}{top}", top, top + 10)
        cursor.execute(f"CREATE TABLE {leftover.name} (LIKE {partitions.TABLE})")
    assert partitions.maintain()[:1] == [leftover.name]
    assert leftover.name not in _parts()
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [leftover.name])
        assert cursor.fetchone()[0] is None
