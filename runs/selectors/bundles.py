"""Export of stored runs as protocol 1.0.0 bundles (import lives in runs.actions)."""

from __future__ import annotations

from runs.engine.state import RunState
from runs.models import ArtifactVersion, RuleSetVersion, Run
from runs.protocol.canonical import canonical_bytes
from runs.protocol.integrity import seal_bundle
from runs.protocol.redaction import redact_bundle
from runs.protocol.values import loads
from runs.selectors.runs import iter_event_bodies

PROTOCOL_VERSION = "1.0.0"


def latest_rule_sets(run: Run) -> list[dict]:
    """The newest version of each rule set, in the order the sets first appeared."""
    order: dict[str, int] = {}
    latest: dict[str, dict] = {}
    for body in RuleSetVersion.objects.filter(run=run).order_by("id").values_list("body", flat=True):
        rule_set = loads(body)
        rule_set_id = rule_set["id"]  # the body's, exact (the column may be cut to its width)
        order.setdefault(rule_set_id, len(order))
        latest[rule_set_id] = rule_set
    return [latest[key] for key in sorted(order, key=order.__getitem__)]


def engine_snapshot(run: Run) -> dict:
    if run.imported_engine is not None:
        return loads(run.imported_engine)
    return RunState.from_json(loads(run.state)).to_engine_snapshot()


def build_bundle(run: Run) -> dict:
    """The RunBundle of a stored run with its integrity hash: every event, every artifact version,
    latest rule sets. Unsigned: runs.actions.signing.do_export_bundle signs what leaves."""
    bundle: dict = {
        "protocolVersion": PROTOCOL_VERSION,
        "run": run.run_doc,
        "trace": list(iter_event_bodies(run)),
        "artifacts": [
            loads(body)
            for body in ArtifactVersion.objects.filter(run=run).order_by("id").values_list("body", flat=True)
        ],
        "ruleSets": latest_rule_sets(run),
    }
    if run.has_engine:
        bundle["engine"] = engine_snapshot(run)
    return seal_bundle(bundle)


def export_bundle_doc(run: Run, *, redact: str | None = None) -> dict:
    """The bundle as it leaves, before its signature: ``redact`` names a redaction policy
    (runs.protocol.redaction): it is then a redacted user bundle with its own integrity hash over
    what it holds, the policy named in ``run.metadata``."""
    bundle = build_bundle(run)
    if redact is not None:
        bundle = redact_bundle(bundle, redact)
    return bundle


def export_bundle_bytes(run: Run, *, redact: str | None = None) -> bytes:
    """Canonical JSON (RFC 8785) of the bundle with its integrity hash, unsigned (the bytes other
    implementations verify); runs.actions.signing.do_export_bundle is the signed export."""
    return canonical_bytes(export_bundle_doc(run, redact=redact))
