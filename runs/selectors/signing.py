"""Reads for signed bundles: the published key documents and who resolved each gate of a run.

The documents hold public keys only (the private seeds never leave the key directory or the
environment, and never reach the database): ``/.well-known/jwks.json`` and its sibling validity
document ``/.well-known/workbench-keys.json`` are built from the ``SigningKey`` rows.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from runs.models import Event, GateDecisionMeta, Run, SigningKey, Workspace
from runs.protocol.signing import (
    GATE_RESOLVED,
    KeySet,
    KeyValidity,
    Verdict,
    load_keys,
    verify_attestations,
)
from runs.protocol.timestamps import format_epoch_ms
from runs.protocol.values import loads

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return format_epoch_ms((moment - _EPOCH) // timedelta(milliseconds=1))


def published_keys() -> list[SigningKey]:
    """Every key that ever signed here (instance and workspace keys), oldest first."""
    return list(SigningKey.objects.order_by("not_before", "id"))


def workspace_keys(workspace: Workspace) -> list[dict[str, Any]]:
    """The keys that sign (or signed) this workspace's exports: its own keys and the instance's,
    newest first, each with what it is used for now ("signing", "retired", "revoked")."""
    rows = SigningKey.objects.filter(workspace=workspace) | SigningKey.objects.filter(workspace__isnull=True)
    own_active = any(k.workspace_id and not k.revoked_at and not k.not_after for k in rows)
    out = []
    for key in rows.order_by("-not_before", "-id"):
        if key.revoked_at:
            state = "revoked"
        elif key.not_after or (key.workspace_id is None and own_active):
            state = "retired" if key.not_after else "not used (the workspace has its own key)"
        else:
            state = "signing"
        out.append({"key": key, "own": key.workspace_id is not None, "state": state})
    return out


def jwks_document(keys: list[SigningKey] | None = None) -> dict[str, Any]:
    """RFC 7517 JWKS of the public keys (RFC 8037 OKP/Ed25519, ``kid`` = RFC 7638 thumbprint)."""
    rows = published_keys() if keys is None else keys
    return {
        "keys": [
            {"kty": "OKP", "crv": "Ed25519", "x": key.x, "kid": key.kid, "alg": "EdDSA", "use": "sig"}
            for key in rows
        ]
    }


def validity_document(keys: list[SigningKey] | None = None) -> dict[str, Any]:
    """The sibling validity document: ``{keys: [{kid, notBefore, notAfter?, revokedAt?}]}``."""
    rows = published_keys() if keys is None else keys
    return {
        "keys": [
            KeyValidity(
                key.kid,
                not_before=_iso(key.not_before),
                not_after=_iso(key.not_after),
                revoked_at=_iso(key.revoked_at),
            ).to_json()
            for key in rows
        ]
    }


def instance_keyset() -> KeySet:
    """This instance's keys with their validity, as a verifier holding both documents reads them."""
    rows = published_keys()
    return load_keys(jwks_document(rows), validity_document(rows))


def approval_actors(run: Run) -> tuple[dict[str, str | None], list[int]]:
    """(event id -> who resolved the gate, trace indices) of the run's ``human_gate_resolved`` events.

    ``by`` is the actor stored beside the event. For the events a run was imported with, the
    importer is not the approver: ``by`` then comes from the imported bundle's verified signature
    (``Run.import_attestation``), else it is unknown (``None``).
    """
    rows = list(
        Event.objects.filter(run=run, type=GATE_RESOLVED)
        .order_by("seq")
        .values_list("seq", "event_id", "actor")
    )
    imported_by: dict[str, str | None] = {}
    if run.import_seq and run.import_attestation:
        verdict = loads(run.import_attestation)
        if verdict.get("status") == "signed":
            imported_by = {a.get("eventId"): a.get("by") for a in verdict.get("approvals") or []}
    actors: dict[str, str | None] = {}
    for seq, event_id, actor in rows:
        if run.import_seq and seq <= run.import_seq:
            actors[event_id] = imported_by.get(event_id)
        else:
            actors[event_id] = actor or None
    return actors, [seq - 1 for seq, _event_id, _actor in rows]


def bundle_signature(
    bundle: dict[str, Any], gate_indices: list[int] | None = None, *, require_signature: bool = False
) -> Verdict:
    """The signature verdict on a bundle whose integrity hash already checked, by this instance's keys."""
    return verify_attestations(
        bundle,
        instance_keyset(),
        require_signature=require_signature,
        integrity_checked=True,
        gate_indices=gate_indices,
    )


def import_provenance(run: Run) -> dict[str, Any] | None:
    """What the run page says about an imported run's bundle: the signature verdict recorded at
    import (``status`` signed / invalid with ``code``), ``{"status": "unsigned"}`` for a bundle
    that carried only its integrity hash, ``None`` for a run that was not imported."""
    if run.import_seq is None:
        return None
    if not run.import_attestation:
        return {"status": "unsigned"}
    return loads(run.import_attestation)


def approval_policies(run: Run) -> dict[str, dict[str, Any]]:
    """event id -> the delegation policy that allowed a machine decision (``workbench.policy``)."""
    return {
        event_id: dict(metadata["workbench.policy"])
        for event_id, metadata in GateDecisionMeta.objects.filter(run=run).values_list("event_id", "metadata")
        if isinstance(metadata, dict) and isinstance(metadata.get("workbench.policy"), dict)
    }


def approval_channels(run: Run) -> dict[str, str]:
    """event id -> the channel each gate decision of the run came from (where it was recorded)."""
    return {
        event_id: str(metadata.get("workbench.channel"))
        for event_id, metadata in GateDecisionMeta.objects.filter(run=run).values_list("event_id", "metadata")
        if isinstance(metadata, dict) and metadata.get("workbench.channel")
    }
