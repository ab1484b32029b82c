"""A password hasher for the test process: Django's PBKDF2 with few iterations.

Django's default costs ~0.35 s a hash on this machine, and most tests create two or three users
(a third of some files' time). The algorithm name stays ``pbkdf2_sha256`` and the iterations are
written in each hash, so a server process of the tests (daphne, the CLI) with the default hashers
still checks these passwords (and upgrades the hash at its first login).
"""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1_000
