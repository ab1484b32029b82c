"""Secrets out of recorded requests: what a provider call stores never holds a key.

redact({"headers": {"x-api-key": "sk-..."}}, secrets=("sk-...",))  # -> "[redacted]" in both places
"""

from __future__ import annotations

from typing import Any

SECRET_KEYS = {
    "api_key",
    "apikey",
    "api-key",
    "x-api-key",
    "authorization",
    "password",
    "secret",
    "access_token",
}
REDACTED = "[redacted]"


def redact(value: Any, secrets: tuple[str, ...] = ()) -> Any:
    """A copy of ``value`` with secret-looking fields and any known secret string blanked out."""
    if isinstance(value, dict):
        return {
            k: (REDACTED if str(k).lower() in SECRET_KEYS and v not in (None, "") else redact(v, secrets))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact(v, secrets) for v in value]
    if isinstance(value, str):
        for secret in secrets:
            if secret and len(secret) >= 6 and secret in value:
                value = value.replace(secret, REDACTED)
        return value
    return value
