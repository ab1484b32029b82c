"""The security suite builds its world (four users) in most tests: hash their passwords quickly."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
