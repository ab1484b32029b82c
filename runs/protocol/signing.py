"""Signed, attributed bundles: a DSSE envelope around an in-toto Statement, Ed25519 keys.

The integrity hash stays what it is (``integrity.sha256`` over ``run, trace, artifacts,
ruleSets, engine?``, :mod:`runs.protocol.integrity`); the signature sits beside it, outside
the hashed body, at ``integrity.attestations: [<envelope>]``, so the hash and every
hash-only verifier (the reference's included) are unaffected. The same envelope may travel
detached, as ``<file>.dsse.json``.

Envelope (DSSE v1.0.2, secure-systems-lab/dsse)::

    {"payloadType": "application/vnd.in-toto+json",
     "payload": base64(<statement bytes>),
     "signatures": [{"keyid": <RFC 7638 thumbprint>, "sig": base64(Ed25519(PAE))}]}

    PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body

(``LEN`` = ASCII decimal byte count, ``SP`` = one space; standard base64 with padding.) The
signature covers the PAE, so the payload type is inside the signed bytes; a verifier checks
the type and the signature over the PAE *before* it parses the payload. The statement bytes
are the RFC 8785 canonical JSON of the statement (a verifier never re-serializes them).

Statement (in-toto Statement v1)::

    {"_type": "https://in-toto.io/Statement/v1",
     "subject": [{"name": "runbundle:<workspace>/<runId>", "digest": {"sha256": <integrity.sha256>}}],
     "predicateType": "https://workbench.dev/attestations/run-bundle/v1",
     "predicate": {
        "protocolVersion": "1.0.0", "instance": <base URL or id>, "workspace": <slug>,
        "exportedBy": "user:<name>" | "token:<name or id>", "at": <ISO 8601 export time>,
        "redaction": <policy name, e.g. "user"> | null,
        "approvals": [{"eventId", "seq", "stepId", "gate", "decision", "by", "at"}, ...]}}

An approval may also carry ``channel`` (where the decision was made: page, api, slack, judge...)
and, for a machine decision (``by`` is ``judge:<name>@<version>``, a gate judge the owner
delegated the gate to), ``policy``: the delegation policy that allowed it (an object whose
``judge`` names ``by``; its kappa, floor, items, confidence, audit share). Verifiers check that a
``policy`` is an object naming the approval's ``by``.

One approval per ``human_gate_resolved`` event of the trace, in trace order: ``seq`` is the
event's 1-based position in the trace (the server's ``Event.seq``), ``at`` its ``ts``, ``by``
the actor the server stored beside it (``Event.actor``; ``null`` when none was stored).

What a signature proves: the instance holding key K asserts that this exact content (the
digest) was exported by ``exportedBy`` at ``at`` and that each gate was resolved by ``by``.
It does not prove that ``by`` personally signed anything (per-approver signatures are a later
step), nor that ``at`` is true beyond the instance's word (a stolen key can backdate).

Keys. Ed25519 only. Public keys are published as a JWKS (RFC 7517 / RFC 8037)::

    {"keys": [{"kty": "OKP", "crv": "Ed25519", "x": <base64url>, "kid": <thumbprint>,
               "alg": "EdDSA", "use": "sig"}]}

``kid`` (and each DSSE ``keyid``) is the RFC 7638 thumbprint: base64url (no padding) of the
SHA-256 of ``{"crv":"Ed25519","kty":"OKP","x":"<x>"}`` (those members only, sorted, no
whitespace). A JWK whose ``kid`` is not its thumbprint is refused.

Key validity lives in a sibling document (published next to the JWKS)::

    {"keys": [{"kid": <thumbprint>, "notBefore"?: T, "notAfter"?: T, "revokedAt"?: T}]}

The same three members may also sit on the JWKs themselves (RFC 7517 tells readers to
ignore members they do not know, so the JWKS stays valid). When both say something about a
key the strictest wins: the latest ``notBefore``, the earliest ``notAfter`` and
``revokedAt``. A signature is accepted only when the statement's ``at`` satisfies
``notBefore <= at <= notAfter`` and ``at < revokedAt`` (instants compared to the millisecond,
as JavaScript's ``Date.parse`` reads them). Old keys stay listed after rotation, so bundles
exported before a rotation keep verifying.

Verdict codes (:class:`Verdict.code`, ``None`` when signed and every check passed):

* ``UNSIGNED`` -- no envelope, and a signature was required;
* ``PAYLOAD_TYPE_MISMATCH`` -- the envelope's ``payloadType`` is not the in-toto type;
* ``UNKNOWN_KEY`` -- no signature carries a key of the key set;
* ``SIGNATURE_INVALID`` -- a malformed envelope, or no signature by a known key verifies
  over the PAE (a changed payload, a changed payload type, a wrong key);
* ``STATEMENT_INVALID`` -- signed bytes that are not our statement (``_type``,
  ``predicateType``, shape), or a redaction that disagrees with the bundle's note;
* ``KEY_REVOKED`` -- the export time is at/after the key's ``revokedAt`` or outside its
  ``notBefore``/``notAfter``;
* ``MISSING_INTEGRITY`` / ``INTEGRITY_MISMATCH`` -- the bundle declares no hash, or one its
  content does not hash to (the protocol's own codes; the CLI reports them before signing);
* ``SUBJECT_DIGEST_MISMATCH`` -- the statement's subject is not this bundle (its digest is
  not ``integrity.sha256``, or it names another run);
* ``APPROVAL_MISMATCH`` -- an approval whose event is missing from the trace or differs from
  it (step, gate, decision, time, position), a duplicate, or a ``human_gate_resolved`` event
  with no approval.

Every envelope present (embedded and detached) must pass; the verdict reports the first.
Pure Python (``cryptography`` for Ed25519), no Django.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from runs.protocol.canonical import canonical_bytes
from runs.protocol.integrity import compute_integrity, declared_integrity
from runs.protocol.redaction import redaction_of
from runs.protocol.signing_keys import (  # noqa: F401 (re-exported: the keys part moved there)
    KeySet,
    KeySetError,
    KeyValidity,
    b64url,
    b64url_decode,
    build_jwks,
    build_validity,
    jwk_thumbprint,
    key_id,
    load_keys,
    pae,
    private_key_from_seed,
    public_jwk,
)
from runs.protocol.timestamps import epoch_ms

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://workbench.dev/attestations/run-bundle/v1"
SUBJECT_PREFIX = "runbundle:"
PROTOCOL_VERSION = "1.0.0"
GATE_RESOLVED = "human_gate_resolved"


class VerdictCode:
    UNSIGNED = "UNSIGNED"
    PAYLOAD_TYPE_MISMATCH = "PAYLOAD_TYPE_MISMATCH"
    UNKNOWN_KEY = "UNKNOWN_KEY"
    SIGNATURE_INVALID = "SIGNATURE_INVALID"
    STATEMENT_INVALID = "STATEMENT_INVALID"
    KEY_REVOKED = "KEY_REVOKED"
    MISSING_INTEGRITY = "MISSING_INTEGRITY"
    INTEGRITY_MISMATCH = "INTEGRITY_MISMATCH"
    SUBJECT_DIGEST_MISMATCH = "SUBJECT_DIGEST_MISMATCH"
    APPROVAL_MISMATCH = "APPROVAL_MISMATCH"


# ---------------------------------------------------------------- signing


def _gate_indices(trace: Sequence[Any], hint: Sequence[int] | None) -> list[int]:
    if hint is None:
        return [i for i, event in enumerate(trace) if event.get("type") == GATE_RESOLVED]
    indices = list(hint)
    for i in indices:
        if not (0 <= i < len(trace)) or trace[i].get("type") != GATE_RESOLVED:
            raise ValueError(f"trace[{i}] is not a {GATE_RESOLVED} event")
    return indices


def approvals_of(
    trace: Sequence[Any],
    actors: Mapping[str, str | None],
    gate_indices: Sequence[int] | None = None,
    channels: Mapping[str, str] | None = None,
    policies: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The approvals of a trace: one per ``human_gate_resolved`` event, ``by`` from ``actors``,
    ``channel`` (page, api, slack, ...) from ``channels`` where it is known, and ``policy`` (a
    machine decision's delegation policy) from ``policies``."""
    out = []
    for i in _gate_indices(trace, gate_indices):
        event = trace[i]
        approval = {
            "eventId": event["id"],
            "seq": i + 1,
            "stepId": event.get("stepId"),
            "gate": event.get("gate"),
            "decision": event.get("decision"),
            "by": actors.get(event["id"]),
            "at": event.get("ts"),
        }
        if channels and event["id"] in channels:
            approval["channel"] = channels[event["id"]]
        if policies and event["id"] in policies:
            approval["policy"] = dict(policies[event["id"]])
        out.append(approval)
    return out


def build_statement(
    bundle: Mapping[str, Any],
    *,
    instance: str,
    workspace: str,
    exported_by: str,
    at: str,
    redaction: str | None,
    actors: Mapping[str, str | None],
    gate_indices: Sequence[int] | None = None,
    channels: Mapping[str, str] | None = None,
    policies: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The in-toto Statement of a bundle that already carries its ``integrity.sha256``."""
    digest = declared_integrity(dict(bundle)) if isinstance(bundle, Mapping) else None
    if digest is None:
        raise ValueError("the bundle has no integrity.sha256: sign it with integrity.seal_bundle first")
    note = redaction_of(dict(bundle))
    noted = note.get("policy") if note else None
    if redaction != noted:
        raise ValueError(f"redaction {redaction!r} but the bundle's redaction note says {noted!r}")
    epoch_ms(at)  # a readable instant, or the parser's error
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": f"{SUBJECT_PREFIX}{workspace}/{bundle['run']['id']}", "digest": {"sha256": digest}}
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "protocolVersion": PROTOCOL_VERSION,
            "instance": instance,
            "workspace": workspace,
            "exportedBy": exported_by,
            "at": at,
            "redaction": redaction,
            "approvals": approvals_of(bundle["trace"], actors, gate_indices, channels, policies),
        },
    }


def sign_envelope(
    payload: bytes, private_key: Ed25519PrivateKey, payload_type: str = PAYLOAD_TYPE
) -> dict[str, Any]:
    """A DSSE envelope of ``payload`` with one Ed25519 signature over its PAE."""
    sig = private_key.sign(pae(payload_type, payload))
    return {
        "payloadType": payload_type,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [{"keyid": key_id(private_key), "sig": base64.b64encode(sig).decode("ascii")}],
    }


def sign_bundle_attestation(
    bundle: Mapping[str, Any],
    *,
    private_key: Ed25519PrivateKey,
    instance: str,
    workspace: str,
    exported_by: str,
    at: str,
    redaction: str | None,
    actors: Mapping[str, str | None],
    gate_indices: Sequence[int] | None = None,
    channels: Mapping[str, str] | None = None,
    policies: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The DSSE envelope attesting ``bundle`` (which must already carry ``integrity.sha256``).

    ``actors`` maps the id of each ``human_gate_resolved`` event to the actor stored beside it
    (``user:alice``...). ``gate_indices`` (optional) are the trace indices of those events
    (``Event.seq - 1`` for a stored run): without it the trace is walked once to find them.
    ``redaction`` must be the policy named in the bundle's redaction note (``None`` for a full
    export). The bundle is not changed; :func:`attach` puts the envelope into a copy.
    """
    statement = build_statement(
        bundle,
        instance=instance,
        workspace=workspace,
        exported_by=exported_by,
        at=at,
        redaction=redaction,
        actors=actors,
        gate_indices=gate_indices,
        channels=channels,
        policies=policies,
    )
    return sign_envelope(canonical_bytes(statement), private_key)


def attach(bundle: Mapping[str, Any], envelope: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``bundle`` with ``integrity.attestations = [envelope]`` (the hash unchanged)."""
    out = dict(bundle)
    integrity = dict(out.get("integrity") or {})
    if "sha256" not in integrity:
        raise ValueError("the bundle has no integrity.sha256")
    integrity["attestations"] = [dict(envelope)]
    out["integrity"] = integrity
    return out


def attestations_of(bundle: Mapping[str, Any]) -> list[Any]:
    """The envelopes embedded in ``integrity.attestations`` (``[]`` when none)."""
    integrity = bundle.get("integrity") if isinstance(bundle, Mapping) else None
    if not isinstance(integrity, Mapping):
        return []
    found = integrity.get("attestations")
    if found is None:
        return []
    return found if isinstance(found, list) else [found]  # a non-list fails as an envelope


# ---------------------------------------------------------------- verification


@dataclass
class Verdict:
    """What :func:`verify_attestations` found.

    ``status``: ``"signed"`` (a known key signed this content and every check passed),
    ``"unsigned"`` (no envelope; ``ok`` unless a signature was required) or ``"invalid"``.
    ``code`` is ``None`` when ``ok``; the other fields come from the signed statement when
    the signature verified (``kid`` as soon as a known key's signature verified).
    """

    ok: bool
    status: str
    code: str | None = None
    message: str | None = None
    kid: str | None = None
    instance: str | None = None
    workspace: str | None = None
    exported_by: str | None = None
    at: str | None = None
    redaction: str | None = None
    approvals: list[dict[str, Any]] = field(default_factory=list)

    @property
    def signed(self) -> bool:
        return self.status == "signed"

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "ok": self.ok,
            "code": self.code,
            "message": self.message,
            "kid": self.kid,
            "instance": self.instance,
            "workspace": self.workspace,
            "exportedBy": self.exported_by,
            "at": self.at,
            "redaction": self.redaction,
            "approvals": self.approvals,
        }

    def summary(self) -> str:
        """The human line's signature part: ``signed by key K (instance I, workspace W); ...``."""
        if self.status == "unsigned":
            return "unsigned (integrity hash only)"
        if self.status != "signed":
            return f"signature not accepted: {self.code}: {self.message}"
        approvals = self.approvals
        text = (
            f"signed by key {self.kid} (instance {self.instance}, workspace {self.workspace}); "
            f"exported by {self.exported_by} at {self.at}"
        )
        if self.redaction:
            text += f"; redacted ({self.redaction})"
        if not approvals:
            return text + "; no approvals"
        names = ", ".join(
            f"{a.get('by') or 'unknown'} {a.get('decision')} {a.get('stepId')}" for a in approvals
        )
        return text + f"; {len(approvals)} approval{'s' if len(approvals) != 1 else ''}: {names}"


class _Refused(Exception):
    def __init__(self, code: str, message: str, kid: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.kid = kid


def _b64(text: Any, where: str) -> bytes:
    if not isinstance(text, str):
        raise _Refused(VerdictCode.SIGNATURE_INVALID, f"{where} must be a base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        try:  # DSSE allows either base64 alphabet
            return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError) as exc:
            raise _Refused(VerdictCode.SIGNATURE_INVALID, f"{where} is not base64") from exc


def _open_envelope(envelope: Any, keys: KeySet) -> tuple[str, dict[str, Any]]:
    """(kid, statement) of an envelope whose signature by a known key verifies over its PAE."""
    if not isinstance(envelope, Mapping):
        raise _Refused(VerdictCode.SIGNATURE_INVALID, "the envelope is not a JSON object")
    payload_type = envelope.get("payloadType")
    if payload_type != PAYLOAD_TYPE:
        raise _Refused(
            VerdictCode.PAYLOAD_TYPE_MISMATCH, f"payloadType is {payload_type!r}, expected {PAYLOAD_TYPE!r}"
        )
    payload = _b64(envelope.get("payload"), "payload")
    signatures = envelope.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        raise _Refused(VerdictCode.SIGNATURE_INVALID, "the envelope has no signatures")
    message = pae(payload_type, payload)
    known_kid: str | None = None
    for i, signature in enumerate(signatures):
        if not isinstance(signature, Mapping):
            raise _Refused(VerdictCode.SIGNATURE_INVALID, f"signatures[{i}] is not an object")
        keyid = signature.get("keyid")
        candidates = [keyid] if keyid in keys.keys else ([] if keyid else list(keys.keys))
        sig = _b64(signature.get("sig"), f"signatures[{i}].sig")
        for kid in candidates:
            known_kid = known_kid or kid
            try:
                keys.keys[kid].verify(sig, message)
            except InvalidSignature:
                continue
            try:
                statement = json.loads(payload)
            except (ValueError, UnicodeDecodeError) as exc:
                raise _Refused(VerdictCode.STATEMENT_INVALID, "the signed payload is not JSON", kid) from exc
            return kid, statement
    if known_kid is None:
        named = ", ".join(str(s.get("keyid")) for s in signatures if isinstance(s, Mapping))
        raise _Refused(VerdictCode.UNKNOWN_KEY, f"signed by key {named}, which the key set does not hold")
    raise _Refused(VerdictCode.SIGNATURE_INVALID, "no signature verifies over the envelope", known_kid)


def _str(obj: Mapping[str, Any], key: str, where: str, kid: str, *, nullable: bool = False) -> Any:
    value = obj.get(key)
    if isinstance(value, str) or (nullable and value is None):
        return value
    raise _Refused(VerdictCode.STATEMENT_INVALID, f"{where}.{key} must be a string", kid)


def _check_statement(statement: Any, kid: str, verdict: Verdict) -> tuple[dict[str, Any], dict[str, Any]]:
    """(subject, predicate) of a well-formed statement; fills the verdict's display fields."""
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        raise _Refused(VerdictCode.STATEMENT_INVALID, f"the payload is not an in-toto {STATEMENT_TYPE}", kid)
    if statement.get("predicateType") != PREDICATE_TYPE:
        raise _Refused(
            VerdictCode.STATEMENT_INVALID,
            f"predicateType {statement.get('predicateType')!r} is not {PREDICATE_TYPE}",
            kid,
        )
    subjects = statement.get("subject")
    predicate = statement.get("predicate")
    if not isinstance(subjects, list) or len(subjects) != 1 or not isinstance(subjects[0], dict):
        raise _Refused(VerdictCode.STATEMENT_INVALID, "the statement must have exactly one subject", kid)
    if not isinstance(predicate, dict) or not isinstance(predicate.get("approvals"), list):
        raise _Refused(VerdictCode.STATEMENT_INVALID, "the predicate must be an object with approvals", kid)
    verdict.instance = _str(predicate, "instance", "predicate", kid)
    verdict.workspace = _str(predicate, "workspace", "predicate", kid)
    verdict.exported_by = _str(predicate, "exportedBy", "predicate", kid)
    verdict.at = _str(predicate, "at", "predicate", kid)
    verdict.redaction = _str(predicate, "redaction", "predicate", kid, nullable=True)
    verdict.approvals = predicate["approvals"]
    return subjects[0], predicate


def _check_approvals(trace: Any, approvals: list[Any], gate_indices: Sequence[int] | None, kid: str) -> None:
    def refuse(text: str) -> _Refused:
        return _Refused(VerdictCode.APPROVAL_MISMATCH, text, kid)

    if not isinstance(trace, list):
        raise refuse("the bundle has no trace")
    covered: set[int] = set()
    for n, approval in enumerate(approvals):
        if not isinstance(approval, dict):
            raise refuse(f"approvals[{n}] is not an object")
        seq: Any = approval.get("seq")  # as signed: an int within the trace, checked next
        event = trace[seq - 1] if type(seq) is int and 1 <= seq <= len(trace) else None
        if event is None or not isinstance(event, dict) or event.get("id") != approval.get("eventId"):
            raise refuse(f"approvals[{n}]: no event {approval.get('eventId')!r} at seq {seq!r} of the trace")
        if event.get("type") != GATE_RESOLVED:
            raise refuse(
                f"approvals[{n}]: event {event.get('id')!r} is a {event.get('type')}, not a {GATE_RESOLVED}"
            )
        for member, trace_member in (
            ("stepId", "stepId"),
            ("gate", "gate"),
            ("decision", "decision"),
            ("at", "ts"),
        ):
            if approval.get(member) != event.get(trace_member):
                raise refuse(
                    f"approvals[{n}].{member} is {approval.get(member)!r} but event {event['id']!r} "
                    f"has {event.get(trace_member)!r}"
                )
        if "by" not in approval or not (approval["by"] is None or isinstance(approval["by"], str)):
            raise refuse(f"approvals[{n}].by must be a string or null")
        if "policy" in approval:
            policy = approval["policy"]
            if not isinstance(policy, dict) or policy.get("judge") != approval["by"]:
                raise refuse(f"approvals[{n}].policy must be an object naming its judge, {approval['by']!r}")
        if seq in covered:
            raise refuse(f"approvals[{n}]: event {event['id']!r} is approved twice")
        covered.add(seq)
    indices = _gate_indices(trace, None) if gate_indices is None else gate_indices
    for i in indices:
        if i + 1 not in covered:
            event = trace[i]
            raise refuse(f"{GATE_RESOLVED} event {event.get('id')!r} (seq {i + 1}) has no approval")


def _verify_one(
    bundle: Mapping[str, Any],
    envelope: Any,
    keys: KeySet,
    declared: str,
    gate_indices: Sequence[int] | None,
) -> Verdict:
    verdict = Verdict(ok=False, status="invalid")
    try:
        kid, statement = _open_envelope(envelope, keys)
        verdict.kid = kid
        subject, predicate = _check_statement(statement, kid, verdict)
        try:
            at = epoch_ms(verdict.at)
        except Exception as exc:  # noqa: BLE001
            raise _Refused(
                VerdictCode.STATEMENT_INVALID, f"predicate.at {verdict.at!r} is not a date-time", kid
            ) from exc
        if at is None:
            raise _Refused(
                VerdictCode.STATEMENT_INVALID, f"predicate.at {verdict.at!r} is not a date-time", kid
            )
        refusal = keys.refusal(kid, at)
        if refusal is not None:
            raise _Refused(VerdictCode.KEY_REVOKED, f"exported at {verdict.at} but {refusal}", kid)
        digest = subject.get("digest")
        signed_digest = digest.get("sha256") if isinstance(digest, dict) else None
        if signed_digest != declared:
            raise _Refused(
                VerdictCode.SUBJECT_DIGEST_MISMATCH,
                f"the signature covers sha256 {signed_digest} but the bundle's integrity is {declared}",
                kid,
            )
        run = bundle.get("run")
        run_id = run.get("id") if isinstance(run, dict) else None
        expected_name = f"{SUBJECT_PREFIX}{verdict.workspace}/{run_id}"
        if subject.get("name") != expected_name:
            raise _Refused(
                VerdictCode.SUBJECT_DIGEST_MISMATCH,
                f"the subject is {subject.get('name')!r}, this bundle is {expected_name!r}",
                kid,
            )
        note = redaction_of(dict(bundle))
        noted = note.get("policy") if note else None
        if verdict.redaction != noted:
            raise _Refused(
                VerdictCode.STATEMENT_INVALID,
                f"the statement says redaction {verdict.redaction!r}, the bundle's note says {noted!r}",
                kid,
            )
        _check_approvals(bundle.get("trace"), predicate["approvals"], gate_indices, kid)
    except _Refused as refused:
        verdict.code = refused.code
        verdict.message = refused.message
        verdict.kid = refused.kid or verdict.kid
        return verdict
    verdict.ok = True
    verdict.status = "signed"
    return verdict


def check_subjects_without_keys(bundle: Mapping[str, Any]) -> Verdict | None:
    """What can be checked of the embedded envelopes with no key set: that each statement's
    subject is this bundle (its sha256 equals ``integrity.sha256``). Needs no key: a bundle edited
    and re-hashed keeps an envelope whose subject names the old digest. ``None`` when every
    readable statement names this bundle (the signatures themselves stay unchecked); a
    ``SUBJECT_DIGEST_MISMATCH`` verdict otherwise. An envelope that cannot be read without a key
    (not base64, not JSON) is left to the keyed check."""
    declared = declared_integrity(dict(bundle))
    if declared is None:
        return None
    for envelope in attestations_of(bundle):
        if not isinstance(envelope, Mapping):
            continue
        try:
            statement = json.loads(_b64(envelope.get("payload"), "payload"))
        except (_Refused, ValueError, UnicodeDecodeError):
            continue
        subjects = statement.get("subject") if isinstance(statement, dict) else None
        if not isinstance(subjects, list):
            continue
        for subject in subjects:
            digest = subject.get("digest") if isinstance(subject, dict) else None
            signed_digest = digest.get("sha256") if isinstance(digest, dict) else None
            if signed_digest != declared:
                return Verdict(
                    ok=False,
                    status="invalid",
                    code=VerdictCode.SUBJECT_DIGEST_MISMATCH,
                    message=(
                        f"the attestation's subject is sha256 {signed_digest} but the bundle's integrity "
                        f"is {declared}: the content changed after it was signed"
                    ),
                )
    return None


def verify_attestations(
    bundle: Mapping[str, Any],
    jwks: Mapping[str, Any] | KeySet,
    validity: Mapping[str, Any] | None = None,
    *,
    require_signature: bool = False,
    detached: Any = None,
    integrity_checked: bool = False,
    gate_indices: Sequence[int] | None = None,
) -> Verdict:
    """The signature verdict on a parsed bundle (see the module doc for the codes).

    ``jwks``: a JWKS document (with ``validity``, see :func:`load_keys`) or a :class:`KeySet`.
    ``detached``: an envelope from ``<file>.dsse.json``, checked with the embedded ones.
    ``integrity_checked``: the caller has already verified ``integrity.sha256`` against the
    content (``check_bundle`` did): the hash is then not computed again. ``gate_indices``: the
    trace indices of the ``human_gate_resolved`` events when the caller knows them
    (``CheckResult.gate_resolved``), sparing a walk of the trace. Raises :class:`KeySetError`
    for an unreadable key set.
    """
    keys = jwks if isinstance(jwks, KeySet) else load_keys(jwks, validity)
    envelopes = attestations_of(bundle)
    if detached is not None:
        envelopes = [detached, *envelopes]
    if not envelopes:
        if require_signature:
            return Verdict(
                ok=False, status="unsigned", code=VerdictCode.UNSIGNED, message="the bundle is not signed"
            )
        return Verdict(ok=True, status="unsigned")
    declared = declared_integrity(dict(bundle))
    if declared is None:
        return Verdict(
            ok=False,
            status="invalid",
            code=VerdictCode.MISSING_INTEGRITY,
            message="the bundle has no integrity.sha256",
        )
    if not integrity_checked:
        actual = compute_integrity(dict(bundle))
        if actual != declared:
            return Verdict(
                ok=False,
                status="invalid",
                code=VerdictCode.INTEGRITY_MISMATCH,
                message=f"declared sha256 {declared} but the content hashes to {actual}",
            )
    first: Verdict | None = None
    for envelope in envelopes:
        verdict = _verify_one(bundle, envelope, keys, declared, gate_indices)
        if not verdict.ok:
            return verdict
        first = first or verdict
    assert first is not None
    return first
