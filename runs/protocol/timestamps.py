"""Protocol timestamps: ISO 8601 date-times with a ``Z`` or ``+HH:MM`` offset, as zod's
``datetime({offset: true})`` accepts them (seconds optional, any number of fraction digits,
offsets up to ``+23:59``, proleptic Gregorian calendar from year ``0000``).

Python's ``datetime`` starts at year 1 and holds six fraction digits, so it cannot read every
such timestamp. These helpers work on the text instead: :func:`epoch_ms` (the instant, as
JavaScript's ``Date.parse`` gives it, milliseconds truncated), :func:`to_utc_iso` (the instant
as ``Date.prototype.toISOString`` writes it) and :func:`to_datetime` (an aware ``datetime``
for database columns, clamped to what ``datetime`` can hold).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_PARTS = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d)(?::(\d\d)(?:\.(\d+))?)?(?:(Z)|([+-])(\d\d):(\d\d))",
    re.ASCII,
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EARLIEST = datetime(1, 1, 1, tzinfo=UTC)  # datetime.min and .max, in UTC
_LATEST = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm)."""
    y -= m <= 2
    era = y // 400  # floor division: Hinnant's C version adjusts for truncation instead
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _civil_from_days(z: int) -> tuple[int, int, int]:
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return y + (m <= 2), m, d


def epoch_ms(value: object) -> int | None:
    """Milliseconds since the epoch of a protocol timestamp (``None`` if it is not one)."""
    match = _PARTS.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return None
    year, month, day, hour, minute = (int(match.group(i)) for i in range(1, 6))
    second = int(match.group(6) or 0)
    millis = int((match.group(7) or "").ljust(3, "0")[:3])
    total = (_days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second) * 1000 + millis
    if match.group(8) is None:
        offset = (int(match.group(10)) * 60 + int(match.group(11))) * 60_000
        total -= offset if match.group(9) == "+" else -offset
    return total


def format_epoch_ms(ms: int) -> str:
    """``Date.prototype.toISOString``: ``YYYY-MM-DDTHH:MM:SS.sssZ`` (``+YYYYYY``/``-YYYYYY``
    outside years 0..9999)."""
    days, rest = divmod(ms, 86_400_000)
    year, month, day = _civil_from_days(days)
    seconds, millis = divmod(rest, 1000)
    hour, seconds = divmod(seconds, 3600)
    minute, second = divmod(seconds, 60)
    if 0 <= year <= 9999:
        y = f"{year:04d}"
    else:
        y = ("+" if year > 0 else "-") + f"{abs(year):06d}"
    return f"{y}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{millis:03d}Z"


# Already the form toISOString prints (days 29-31 are left to the full path, which knows month
# lengths): most recorded timestamps, returned as they are without the arithmetic.
_CANONICAL = re.compile(
    r"\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d{3}Z"
)


def to_utc_iso(value: str) -> str | None:
    """The timestamp as the UTC instant JavaScript prints (``None`` if it is not one)."""
    if isinstance(value, str) and len(value) == 24 and _CANONICAL.fullmatch(value):
        return value
    ms = epoch_ms(value)
    return None if ms is None else format_epoch_ms(ms)


def to_datetime(value: str | None) -> datetime | None:
    """An aware UTC ``datetime`` for a database column; instants outside years 1..9999 are
    clamped to ``datetime.min``/``datetime.max`` (the protocol text stays authoritative)."""
    if not value:
        return None
    ms = epoch_ms(value)
    if ms is None:
        return None
    try:
        return _EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        return _EARLIEST if ms < 0 else _LATEST
