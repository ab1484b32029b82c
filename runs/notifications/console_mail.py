"""The console mailer of development (``make run`` prints the e-mails it would send).

Django's console backend holds a lock per backend instance, and ``send_mail`` makes a new
instance for every message; the outbox sends its attempts on threads of their own
(``runs.notifications.delivery``), so two gate e-mails printed at once came out interleaved line
by line, neither readable nor its links usable. One lock for the process keeps each message whole.
"""

from __future__ import annotations

import threading

from django.core.mail.backends import console

_LOCK = threading.RLock()


class EmailBackend(console.EmailBackend):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._lock = _LOCK
