"""Importing a bundle through the one write path: verified completely, stored in one transaction."""

from __future__ import annotations

from django.db import transaction

from runs.actions.core import (
    ActionError,
    Appender,
    artifact_row,
    new_run_row,
    save_new_run,
    set_projection,
)
from runs.actions.notify import RunChange, notify_on_commit
from runs.engine.fold import fold
from runs.engine.state import initial_run_doc
from runs.models import ArtifactVersion, RuleSetVersion, Run, Workspace
from runs.protocol.bundle import check_bundle
from runs.protocol.errors import ErrorCode
from runs.protocol.signing import VerdictCode, attestations_of
from runs.protocol.values import dumps, new_id
from runs.selectors.signing import bundle_signature


def do_import_bundle(*, workspace: Workspace, data: bytes, actor: str = "", as_new_id: bool = False) -> Run:
    """Verify a bundle completely, then store it in one transaction (nothing is left on failure)."""
    result = check_bundle(data)
    if not result.ok:
        raise ActionError(result.code or ErrorCode.INVALID_RUN_BUNDLE, result.message or "invalid bundle")
    bundle = result.bundle
    assert bundle is not None
    attestation = import_verdict(bundle, result.gate_resolved)
    if as_new_id:
        bundle = _with_new_run_id(bundle, new_id("run"))
    return _store_bundle(workspace=workspace, bundle=bundle, actor=actor, attestation=attestation)


def import_verdict(bundle: dict, gate_indices: list[int] | None = None) -> dict | None:
    """The signature verdict of a bundle whose integrity already checked (``None``: unsigned).

    Verified against this instance's keys. A signature by a key this instance does not hold is
    recorded as such (``UNKNOWN_KEY``: nobody here vouches for it) and the import goes on; any
    other failure (a forged or changed signature, a revoked key, a subject or approval that is not
    this bundle's) refuses the import with the verdict's code.
    """
    if not attestations_of(bundle):
        return None
    verdict = bundle_signature(bundle, gate_indices)
    if not verdict.ok and verdict.code != VerdictCode.UNKNOWN_KEY:
        raise ActionError(
            verdict.code or VerdictCode.SIGNATURE_INVALID, f"signature not accepted: {verdict.message}"
        )
    return verdict.to_json()


def _with_new_run_id(bundle: dict, run_id: str) -> dict:
    """A copy of the bundle under another run id (its integrity no longer applies and is dropped)."""
    renamed = dict(bundle)
    renamed["run"] = {**bundle["run"], "id": run_id}
    renamed["trace"] = [{**event, "runId": run_id} for event in bundle["trace"]]
    renamed.pop("integrity", None)
    return renamed


def _store_bundle(*, workspace: Workspace, bundle: dict, actor: str, attestation: dict | None = None) -> Run:
    trace = bundle["trace"]
    state = fold(initial_run_doc(bundle["run"]), [])
    with transaction.atomic():
        run = new_run_row(workspace=workspace, state=state, actor=actor, has_engine="engine" in bundle)
        save_new_run(run)
        appender = Appender(run, state, actor, derive_versions=False)
        for event in trace:
            appender.append(event)
        appender.save()
        # The bundle's run document is authoritative (it is what the hash covers).
        state.run = bundle["run"]
        run.import_doc = dumps(bundle["run"])
        run.import_seq = len(trace)
        run.import_attestation = None if attestation is None else dumps(attestation)
        set_projection(run, state)
        engine = bundle.get("engine")
        run.imported_engine = (
            dumps(engine) if engine is not None and engine != state.to_engine_snapshot() else None
        )
        run.save()
        ArtifactVersion.objects.bulk_create(artifact_row(run, art, None) for art in bundle["artifacts"])
        RuleSetVersion.objects.bulk_create(
            RuleSetVersion(run=run, rule_set_id=rs["id"], version=0, seq=None, body=dumps(rs))
            for rs in bundle["ruleSets"]
        )
        notify_on_commit(RunChange.of(run, 1 if trace else 0, run.last_seq))
    return run
