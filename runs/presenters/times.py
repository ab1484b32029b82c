"""How every page writes a moment (pure; the ``when`` template filter and static/workbench/shell.js
write the same words, so a page that stays open keeps them fresh).

    relative(now - 5 s, now)      -> "just now"        relative(now - 200 s, now) -> "3 min ago"
    relative(now - 3 h, now)      -> "3 h ago"         relative(now - 2 d, now)   -> "2 days ago"
    relative(now + 90 s, now)     -> "in 1 min"        (an expiry, a deadline)
    relative(40 days ago, now)    -> "2026-10-25"      (past 30 days: the date itself)
    absolute(moment)              -> "2026-12-04 03:25:01.250 UTC"  (the exact moment, for a title)

A moment is an aware ``datetime`` or a protocol timestamp (ISO 8601 text, ``Z`` or an offset, any
fraction digits); anything else is not a moment (``None``).
"""

from __future__ import annotations

from datetime import UTC, datetime

from runs.protocol.timestamps import to_datetime

JUST_NOW_SECONDS = 45
DATE_AFTER_DAYS = 30


def moment(value: object) -> datetime | None:
    """An aware UTC datetime of ``value`` (a datetime, naive taken as UTC, or protocol text)."""
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC)
    if isinstance(value, str) and value:
        try:
            return to_datetime(value)
        except (TypeError, ValueError):
            return None
    return None


def _round(x: float) -> int:
    """Half up, as JavaScript's Math.round (shell.js): 2.5 -> 3 (Python's round gives 2)."""
    return int(x + 0.5)


def relative(value: datetime, now: datetime) -> str:
    """Words for how long ago (or how far ahead) ``value`` is from ``now``."""
    seconds = (now - value).total_seconds()
    ahead = seconds < 0
    seconds = abs(seconds)
    if seconds < JUST_NOW_SECONDS:
        return "just now"
    minutes = _round(seconds / 60)
    if minutes < 60:
        words = f"{max(1, minutes)} min"
    elif seconds < 36 * 3600:
        words = f"{_round(seconds / 3600)} h"
    elif seconds < DATE_AFTER_DAYS * 86400:
        days = _round(seconds / 86400)
        words = f"{days} day{'s' if days != 1 else ''}"
    else:
        return value.strftime("%Y-%m-%d")
    return f"in {words}" if ahead else f"{words} ago"


def absolute(value: datetime) -> str:
    """The exact moment in UTC, to the millisecond when it has one."""
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond // 1000:03d}"
    return f"{text} UTC"


def iso(value: datetime) -> str:
    """A ``<time datetime>`` value (UTC, milliseconds, ``Z``): what shell.js reads."""
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
