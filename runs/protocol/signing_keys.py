"""Keys of signed bundles (pure: no Django): encodings, Ed25519 keys and their ids (RFC 7638
thumbprints), JWKS and validity documents, and the key set a verifier reads them into. Split from
:mod:`runs.protocol.signing`, which re-exports these names."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from runs.protocol.timestamps import epoch_ms

VALIDITY_MEMBERS = ("notBefore", "notAfter", "revokedAt")


class KeySetError(ValueError):
    """A JWKS or validity document that cannot be read as one (the caller's input is wrong)."""


# ---------------------------------------------------------------- encodings and keys


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    if not isinstance(text, str) or "=" in text:
        raise ValueError("not unpadded base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding of ``payload_type`` and ``payload``."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def private_key_from_seed(seed: bytes) -> Ed25519PrivateKey:
    """The Ed25519 private key of a 32-byte seed (RFC 8032 secret key)."""
    return Ed25519PrivateKey.from_private_bytes(seed)


def _raw_public(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def jwk_thumbprint(jwk: Mapping[str, Any]) -> str:
    """RFC 7638 thumbprint (SHA-256, base64url) of an OKP JWK: over ``{crv, kty, x}`` only."""
    required = {"crv": jwk["crv"], "kty": jwk["kty"], "x": jwk["x"]}
    text = json.dumps(required, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return b64url(hashlib.sha256(text.encode("utf-8")).digest())


def public_jwk(key: Ed25519PublicKey | Ed25519PrivateKey) -> dict[str, str]:
    """The RFC 8037 JWK of an Ed25519 public key (of a private key's public half), with its kid."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    jwk = {"kty": "OKP", "crv": "Ed25519", "x": b64url(_raw_public(public))}
    return {**jwk, "kid": jwk_thumbprint(jwk), "alg": "EdDSA", "use": "sig"}


def key_id(key: Ed25519PublicKey | Ed25519PrivateKey) -> str:
    """The RFC 7638 thumbprint of a key: its JWK ``kid`` and its DSSE ``keyid``."""
    return public_jwk(key)["kid"]


@dataclass(frozen=True)
class KeyValidity:
    """When a key may sign: ISO 8601 instants, ``None`` for no bound."""

    kid: str
    not_before: str | None = None
    not_after: str | None = None
    revoked_at: str | None = None

    def to_json(self) -> dict[str, str]:
        out = {"kid": self.kid}
        for member, value in zip(
            VALIDITY_MEMBERS, (self.not_before, self.not_after, self.revoked_at), strict=True
        ):
            if value is not None:
                out[member] = value
        return out


def build_jwks(keys: Iterable[Ed25519PublicKey | Ed25519PrivateKey]) -> dict[str, Any]:
    """The JWKS document of public keys (private keys are reduced to their public half)."""
    return {"keys": [public_jwk(key) for key in keys]}


def build_validity(records: Iterable[KeyValidity]) -> dict[str, Any]:
    """The sibling validity document ``{"keys": [{kid, notBefore?, notAfter?, revokedAt?}]}``."""
    return {"keys": [record.to_json() for record in records]}


@dataclass
class _Bounds:
    not_before: tuple[str, int] | None = None
    not_after: tuple[str, int] | None = None
    revoked_at: tuple[str, int] | None = None

    def merge(self, member: str, text: Any, where: str) -> None:
        if text is None:
            return
        if not isinstance(text, str):
            raise KeySetError(f"{where}.{member} must be an ISO 8601 string")
        try:
            instant = epoch_ms(text)
        except Exception as exc:  # noqa: BLE001 (whatever the parser raises: not a timestamp)
            raise KeySetError(f"{where}.{member} is not an ISO 8601 date-time: {text!r}") from exc
        if instant is None:  # not a protocol timestamp (epoch_ms says so rather than raising)
            raise KeySetError(f"{where}.{member} is not an ISO 8601 date-time: {text!r}")
        if member == "notBefore":
            if self.not_before is None or instant > self.not_before[1]:
                self.not_before = (text, instant)
        elif member == "notAfter":
            if self.not_after is None or instant < self.not_after[1]:
                self.not_after = (text, instant)
        elif self.revoked_at is None or instant < self.revoked_at[1]:
            self.revoked_at = (text, instant)


@dataclass
class KeySet:
    """Public keys by kid with their validity (see :func:`load_keys`)."""

    keys: dict[str, Ed25519PublicKey] = field(default_factory=dict)
    jwks: dict[str, dict[str, Any]] = field(default_factory=dict)
    bounds: dict[str, _Bounds] = field(default_factory=dict)

    def refusal(self, kid: str, at: int) -> str | None:
        """Why ``kid`` may not sign at instant ``at`` (ms), or ``None`` when it may."""
        bounds = self.bounds.get(kid)
        if bounds is None:
            return None
        if bounds.revoked_at is not None and at >= bounds.revoked_at[1]:
            return f"key {kid} was revoked at {bounds.revoked_at[0]}"
        if bounds.not_before is not None and at < bounds.not_before[1]:
            return f"key {kid} is not valid before {bounds.not_before[0]}"
        if bounds.not_after is not None and at > bounds.not_after[1]:
            return f"key {kid} expired at {bounds.not_after[0]}"
        return None


def load_keys(jwks: Mapping[str, Any], validity: Mapping[str, Any] | None = None) -> KeySet:
    """A :class:`KeySet` from a JWKS document and an optional validity document.

    Raises :class:`KeySetError` for a document that is not a JWKS / validity document, a JWK
    that is not an Ed25519 public key, or a ``kid`` that is not the key's thumbprint. Keys of
    other types (``kty`` other than ``OKP``, other curves) are skipped, as RFC 7517 allows.
    """
    if not isinstance(jwks, Mapping) or not isinstance(jwks.get("keys"), list):
        raise KeySetError("a JWKS must be an object with a `keys` array")
    out = KeySet()
    for i, jwk in enumerate(jwks["keys"]):
        where = f"keys[{i}]"
        if not isinstance(jwk, Mapping):
            raise KeySetError(f"{where} must be an object")
        if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
            continue
        if "d" in jwk:
            raise KeySetError(f"{where} holds a private key (`d`): publish public keys only")
        try:
            raw = b64url_decode(jwk.get("x"))  # type: ignore[arg-type]
            public = Ed25519PublicKey.from_public_bytes(raw)
        except (ValueError, TypeError, binascii.Error) as exc:
            raise KeySetError(f"{where}.x is not a base64url Ed25519 public key") from exc
        kid = jwk_thumbprint(jwk)
        if "kid" in jwk and jwk["kid"] != kid:
            raise KeySetError(f"{where}.kid {jwk['kid']!r} is not the key's RFC 7638 thumbprint {kid}")
        out.keys[kid] = public
        out.jwks[kid] = dict(jwk)
        bounds = out.bounds.setdefault(kid, _Bounds())
        for member in VALIDITY_MEMBERS:
            bounds.merge(member, jwk.get(member), where)
    if validity is not None:
        if not isinstance(validity, Mapping) or not isinstance(validity.get("keys"), list):
            raise KeySetError("a validity document must be an object with a `keys` array")
        for i, entry in enumerate(validity["keys"]):
            where = f"validity.keys[{i}]"
            if not isinstance(entry, Mapping) or not isinstance(entry.get("kid"), str):
                raise KeySetError(f"{where} must be an object with a string `kid`")
            bounds = out.bounds.setdefault(entry["kid"], _Bounds())
            for member in VALIDITY_MEMBERS:
                bounds.merge(member, entry.get(member), where)
    return out
