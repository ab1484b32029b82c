"""Standard Webhooks 1.0 headers: ``webhook-id``, ``webhook-timestamp``, ``webhook-signature``.

The signature is ``v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`` under the secret
(``whsec_<base64>``), computed by ``standardwebhooks`` (the specification's reference
implementation). During a secret rotation both secrets sign, space-separated, so a receiver
holding either one verifies. (The optional ``v1a`` Ed25519 scheme is not offered.)
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from standardwebhooks import Webhook as Signer


def signed_headers(message_id: str, body: str, secrets: Sequence[str], *, at: datetime | None = None) -> dict:
    moment = (at or datetime.now(UTC)).replace(microsecond=0)
    signatures = [Signer(secret).sign(message_id, moment, body) for secret in secrets if secret]
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(moment.timestamp())),
        "webhook-signature": " ".join(signatures),
    }
