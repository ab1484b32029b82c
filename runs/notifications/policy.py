"""When to try again, and what an answer means. Pure: no Django, no network."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

# Seconds before attempt n+1 (index n): the first attempt at once, then 5 s, 5 min, 30 min, 2 h,
# 5 h, 10 h, 14 h, 20 h and 24 h later; about three days and two hours in all, ten attempts.
SCHEDULE: tuple[int, ...] = (0, 5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400)
MAX_ATTEMPTS = len(SCHEDULE)
GIVE_UP_AFTER = sum(SCHEDULE)  # a hook failing for this long without one success is given up on
SLOW_DOWN = frozenset({429, 502, 504})  # the receiver is overloaded: wait one step longer
RETRY_AFTER_CAP = 86400  # a Retry-After beyond a day is read as a day
JITTER = 0.1  # +-10 %, so many failed deliveries do not come back at the same instant


def retry_delay(
    attempts_made: int,
    *,
    status: int | None = None,
    retry_after: float | None = None,
    rng: random.Random | None = None,
) -> float | None:
    """Seconds until the next attempt after ``attempts_made`` failed ones; None: give up."""
    if attempts_made >= MAX_ATTEMPTS:
        return None
    delay = float(SCHEDULE[max(attempts_made, 1)])
    if status in SLOW_DOWN:
        delay = max(delay, SCHEDULE[min(attempts_made + 1, MAX_ATTEMPTS - 1)])
    if retry_after is not None:
        delay = max(delay, min(retry_after, RETRY_AFTER_CAP))
    return delay * (1 + (rng or random).uniform(-JITTER, JITTER))


def given_up(failing_for: float) -> bool:
    """Whether a hook that has failed for ``failing_for`` seconds without a success is given up on
    (the same span as one delivery's whole schedule: with the hook's breaker open its deliveries
    wait rather than spend their attempts, so the hook's streak is what runs out)."""
    return failing_for >= GIVE_UP_AFTER


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """``Retry-After`` in seconds (delta-seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


@dataclass(frozen=True)
class Verdict:
    delivered: bool
    retry: bool  # worth another attempt (if any are left)
    disable: str = ""  # why the hook must be disabled now ("" keeps it)
    error: str = ""


def judge(status: int) -> Verdict:
    """What a receiver's HTTP status means for the delivery."""
    if 200 <= status < 300:
        return Verdict(delivered=True, retry=False)
    if 300 <= status < 400:
        return Verdict(False, True, error=f"the receiver answered {status}: redirects are not followed")
    if status == 410:
        return Verdict(False, False, disable="the receiver answered 410 Gone", error="410 Gone")
    return Verdict(False, True, error=f"the receiver answered {status}")
