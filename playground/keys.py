"""API keys at rest: Fernet encryption with a key derived from SECRET_KEY (HKDF-SHA256).

Keys are decrypted only where a provider call is made; views show at most a hint ("…a1b2").
Rotating SECRET_KEY makes stored keys unreadable: :class:`KeyUnreadable` says so, and the
settings page asks for the key again.
"""

from __future__ import annotations

import base64
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings


class KeyUnreadable(Exception):
    pass


@lru_cache(maxsize=4)
def _fernet(secret: str) -> Fernet:
    derived = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=b"workbench.playground", info=b"api-keys"
    ).derive(secret.encode())
    return Fernet(base64.urlsafe_b64encode(derived))


def encrypt(plain: str) -> str:
    return _fernet(settings.SECRET_KEY).encrypt(plain.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _fernet(settings.SECRET_KEY).decrypt(token.encode()).decode()
    except InvalidToken:
        raise KeyUnreadable(
            "the stored API key cannot be decrypted (was SECRET_KEY changed?): enter it again"
        ) from None


def hint(plain: str) -> str:
    return f"…{plain[-4:]}" if len(plain) >= 8 else "…"
