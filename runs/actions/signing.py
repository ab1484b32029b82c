"""Signing keys and signed exports (issue 25): every way out of a bundle ends in :func:`do_export_bundle`.

Keys are Ed25519 (runs.protocol.signing). The instance key comes from ``WORKBENCH_SIGNING_KEY``
(an operator's seed: base64 of 32 bytes, or the path of a file holding it) or is created on first
use into ``WORKBENCH_SIGNING_KEY_DIR`` (one ``<kid>.seed`` file per key, 0600, in a 0700 folder).
A workspace may have its own key (``manage.py signing_key create --workspace SLUG``); its exports
are then signed with it instead. Key metadata (public half, notBefore/notAfter/revokedAt) is a
``SigningKey`` row: every process of a deployment publishes the same JWKS from the database, and
rotation/revocation is a transaction, not a file edit. The private seeds never enter the database,
a page, a log or an API answer.

Signing lives here rather than in runs.selectors.bundles because the first export of an instance
writes (it creates the key file and its row): selectors only read.
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from runs.actions.core import ActionError
from runs.models import Run, SigningKey, Workspace
from runs.protocol.canonical import canonical_bytes
from runs.protocol.errors import ErrorCode
from runs.protocol.signing import (
    attach,
    key_id,
    private_key_from_seed,
    public_jwk,
    sign_bundle_attestation,
)
from runs.protocol.values import now_iso
from runs.selectors.bundles import export_bundle_doc
from runs.selectors.signing import approval_actors, approval_channels, approval_policies

SIGNING_KEY_ERROR = "SIGNING_KEY_ERROR"  # the configured key cannot be used (operator's problem)
UNKNOWN_KEY = "UNKNOWN_KEY"
SEED_SUFFIX = ".seed"

_loaded: dict[str, Ed25519PrivateKey] = {}  # kid -> private key read from disk or the environment


@dataclass(frozen=True)
class SignedExport:
    """A signed export: the canonical bytes, the parsed bundle and the DSSE envelope in it."""

    data: bytes
    bundle: dict[str, Any]
    envelope: dict[str, Any]
    kid: str

    @property
    def envelope_bytes(self) -> bytes:
        """The detached ``<file>.dsse.json``: the same envelope, canonical JSON."""
        return canonical_bytes(self.envelope)


# ---------------------------------------------------------------- keys


def _ms(moment: datetime) -> datetime:
    """To the millisecond: what the validity document publishes, so ``at`` compares the same."""
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def _key_dir() -> Path:
    return Path(settings.WORKBENCH_SIGNING_KEY_DIR)


def _decode_seed(text: str) -> bytes | None:
    text = text.strip()
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            seed = decode(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError):
            continue
        if len(seed) == 32:
            return seed
    return None


def env_seed() -> bytes | None:
    """The operator's seed from ``WORKBENCH_SIGNING_KEY`` (``None`` when unset)."""
    raw = (settings.WORKBENCH_SIGNING_KEY or "").strip()
    if not raw:
        return None
    seed = _decode_seed(raw)
    if seed is not None:
        return seed
    try:
        data = Path(raw).read_bytes()
    except OSError:
        raise ActionError(
            SIGNING_KEY_ERROR,
            "WORKBENCH_SIGNING_KEY is neither an Ed25519 seed (base64 of 32 bytes) nor a readable file",
        ) from None
    seed = data if len(data) == 32 else _decode_seed(data.decode("ascii", "replace"))
    if seed is None:
        raise ActionError(SIGNING_KEY_ERROR, "the file WORKBENCH_SIGNING_KEY names holds no Ed25519 seed")
    return seed


def _write_seed(seed: bytes, kid: str) -> None:
    folder = _key_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(folder / f"{kid}{SEED_SUFFIX}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(base64.b64encode(seed).decode("ascii") + "\n")


def _private_key(row: SigningKey) -> Ed25519PrivateKey | None:
    """The private half of a key this process can reach (``None`` when its seed is not here)."""
    cached = _loaded.get(row.kid)
    if cached is not None:
        return cached
    if row.source == "env":
        seed = env_seed()
    else:
        try:
            seed = _decode_seed((_key_dir() / f"{row.kid}{SEED_SUFFIX}").read_text())
        except OSError:
            seed = None
    if seed is None:
        return None
    key = private_key_from_seed(seed)
    if key_id(key) != row.kid:
        return None
    _loaded[row.kid] = key
    return key


def _active(workspace: Workspace | None) -> SigningKey | None:
    return (
        SigningKey.objects.filter(workspace=workspace, revoked_at__isnull=True, not_after__isnull=True)
        .order_by("-not_before", "-id")
        .first()
    )


def _new_row(key: Ed25519PrivateKey, *, workspace: Workspace | None, source: str, at: datetime) -> SigningKey:
    jwk = public_jwk(key)
    return SigningKey.objects.create(
        kid=jwk["kid"], x=jwk["x"], workspace=workspace, source=source, not_before=_ms(at)
    )


def _retire(workspace: Workspace | None, at: datetime, keep: str | None = None) -> list[str]:
    """End the validity of the scope's active keys at ``at`` (rotation): they stay published."""
    rows = SigningKey.objects.filter(workspace=workspace, revoked_at__isnull=True, not_after__isnull=True)
    if keep:
        rows = rows.exclude(kid=keep)
    kids = list(rows.values_list("kid", flat=True))
    rows.update(not_after=_ms(at))
    return kids


def _create(workspace: Workspace | None, at: datetime) -> SigningKey:
    seed = os.urandom(32)
    key = private_key_from_seed(seed)
    _write_seed(seed, key_id(key))
    row = _new_row(key, workspace=workspace, source="file", at=at)
    _loaded[row.kid] = key
    return row


def _instance_key(now: datetime) -> tuple[Ed25519PrivateKey, SigningKey]:
    """The instance key: the operator's from the environment, else the newest active one, else a new one."""
    seed = env_seed()
    if seed is not None:
        key = private_key_from_seed(seed)
        kid = key_id(key)
        with transaction.atomic():
            row = SigningKey.objects.filter(kid=kid).first()
            if row is None:
                _retire(None, now)
                row = _new_row(key, workspace=None, source="env", at=now)
        if row.revoked_at is not None:
            raise ActionError(
                SIGNING_KEY_ERROR,
                f"the key in WORKBENCH_SIGNING_KEY ({kid}) was revoked: configure a new one",
            )
        _loaded[kid] = key
        return key, row
    with transaction.atomic():
        row = _active(None)
        stored = _private_key(row) if row is not None else None
        if row is None or stored is None:
            if row is not None:  # its seed is gone (another host's key dir): start a new key
                _retire(None, now)
            row = _create(None, now)
            stored = _loaded[row.kid]
    return stored, row


def signer_for(workspace: Workspace) -> tuple[Ed25519PrivateKey, SigningKey]:
    """The key that signs the workspace's exports: its own active key if it has one, else the instance's."""
    own = _active(workspace)
    if own is not None:
        key = _private_key(own)
        if key is not None:
            return key, own
    return _instance_key(timezone.now())


def do_create_signing_key(*, workspace: Workspace | None = None, at: datetime | None = None) -> SigningKey:
    """A first key for the instance (``workspace=None``) or a workspace; refused when one is active."""
    at = at or timezone.now()
    if workspace is None and env_seed() is not None:
        raise ActionError(
            ErrorCode.INVALID_INPUT, "the instance key comes from WORKBENCH_SIGNING_KEY: change it there"
        )
    with transaction.atomic():
        current = _active(workspace)
        if current is not None:
            raise ActionError(
                ErrorCode.INVALID_INPUT, f"key {current.kid} is active already: rotate it to replace it"
            )
        return _create(workspace, at)


def do_rotate_signing_key(*, workspace: Workspace | None = None, at: datetime | None = None) -> SigningKey:
    """A new key from ``at``; the active one stops signing then (notAfter) and stays published."""
    at = at or timezone.now()
    if workspace is None and env_seed() is not None:
        raise ActionError(
            ErrorCode.INVALID_INPUT, "the instance key comes from WORKBENCH_SIGNING_KEY: change it there"
        )
    with transaction.atomic():
        _retire(workspace, at)
        return _create(workspace, at)


def do_revoke_signing_key(*, kid: str, at: datetime | None = None) -> SigningKey:
    """Revoke a key from ``at`` (default now; earlier when it leaked earlier): bundles whose
    signature says they were exported at or after ``at`` fail verification. It signs nothing more."""
    at = at or timezone.now()
    with transaction.atomic():
        row = SigningKey.objects.select_for_update().filter(kid=kid).first()
        if row is None:
            raise ActionError(UNKNOWN_KEY, f"no signing key {kid!r}")
        if row.revoked_at is None or _ms(at) < row.revoked_at:
            row.revoked_at = _ms(at)
            row.save(update_fields=["revoked_at"])
    _loaded.pop(kid, None)
    return row


# ---------------------------------------------------------------- signed exports


def do_export_bundle(run: Run, *, exported_by: str, redact: str | None = None) -> SignedExport:
    """The run's bundle (``redact``: by that policy), signed by the workspace's or the instance's key.

    ``exported_by`` is the caller (``user:<name>``, ``token:<key id>``, ``cli:<name>``). The
    signature names the instance, the workspace, the exporter, the time, the redaction policy and
    one approval per resolved gate with the actor stored beside it.
    """
    bundle = export_bundle_doc(run, redact=redact)
    actors, gates = approval_actors(run)
    key, row = signer_for(run.workspace)
    envelope = sign_bundle_attestation(
        bundle,
        private_key=key,
        instance=settings.WORKBENCH_INSTANCE,
        workspace=run.workspace.slug,
        exported_by=exported_by,
        at=now_iso(),
        redaction=redact,
        actors=actors,
        gate_indices=gates,
        channels=approval_channels(run),
        policies=approval_policies(run),
    )
    signed = attach(bundle, envelope)
    return SignedExport(data=canonical_bytes(signed), bundle=signed, envelope=envelope, kid=row.kid)
