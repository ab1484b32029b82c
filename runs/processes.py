"""Whether a process still runs: the OTLP spool's claims and the transcripts' files made ahead
belong to a process, and are taken back once it is gone."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """True while a process with this pid exists (one of another user's counts too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
