"""How every page writes numbers (pure; the template filters in ``runs.templatetags.workbench`` and
the presenters call these, so a run header, a ledger, the runs list and a comparison agree).

    count(2917500)              -> "2,917,500"     (None -> "unknown": usage nobody reported)
    duration_ms(2_617_400)      -> "43 min 37 s"   exact_ms(2_617_400) -> "2,617,400 ms"
    duration_ms(1234)           -> "1.2 s"         duration_ms(850) -> "850 ms"
    money("3.50058", "USD")     -> "3.50"          money("0.0035", "usd") -> "0.0035"
    money_text({"USD": "3.5"})  -> "USD 3.50"
    cost_text({}, calls=0)      -> "USD 0"         cost_text({}, calls=3) -> "unknown"

Money, one rule for every page: an amount of one minor unit or more (a cent for USD and EUR; JPY
and KRW have none) is shown to the currency's minor unit (2 decimals for USD), half up. A smaller
amount that is not zero is never rounded to 0: it is shown to 2 significant digits, trailing
zeros dropped (``0.0035``, ``0.001``, ``0.00012``). Zero is ``0``; an unknown amount ``unknown``.
The exact amount (as the ledger adds it up, 12 decimals) is :func:`exact_money`, for a title.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

UNKNOWN = "unknown"
MINOR_UNITS = {"JPY": 0, "KRW": 0, "VND": 0, "CLP": 0, "ISK": 0, "BHD": 3, "KWD": 3, "OMR": 3, "JOD": 3}
DEFAULT_MINOR_UNITS = 2
SMALL_SIGNIFICANT = 2  # significant digits of an amount below the minor unit


def decimal_of(value: Any) -> Decimal | None:
    """A number (int, float by its shortest text, Decimal or numeric text) as a Decimal, else None."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, Decimal):
        return value if value.is_finite() else None
    if isinstance(value, int | float | str):
        try:
            number = Decimal(repr(value) if isinstance(value, float) else str(value).strip())
        except (InvalidOperation, ValueError):
            return None
        return number if number.is_finite() else None
    return None


def _plain(value: Decimal) -> str:
    """``1234.5000`` -> ``1,234.5``: thousands separators, no exponent, no trailing zeros."""
    text = f"{value:,f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def plain(value: Any) -> str:
    """A number exactly, with thousands separators: ``1234.5`` -> ``1,234.5`` (not a number: its text)."""
    number = decimal_of(value)
    return ("" if value is None else str(value)) if number is None else _plain(number)


def count(value: Any) -> str:
    """A count (events, calls, tokens) with thousands separators; ``unknown`` when None."""
    number = decimal_of(value)
    if number is None:
        return UNKNOWN if value is None else str(value)
    if number == number.to_integral_value():
        return f"{int(number):,}"
    return _plain(number.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def duration_ms(value: Any) -> str:
    """Milliseconds for people: ``0 ms``, ``0.4 ms``, ``850 ms``, ``1.2 s``, ``43 min 37 s``,
    ``2 h 5 min``; ``""`` when not a number (a running run has no duration yet)."""
    number = decimal_of(value)
    if number is None:
        return ""
    ms = float(number)
    sign = "-" if ms < 0 else ""
    ms = abs(ms)
    if ms == 0:
        return "0 ms"
    if ms < 10:
        return f"{sign}{ms:.1f} ms".replace(".0 ms", " ms")
    if ms < 1000:
        return f"{sign}{round(ms)} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{sign}{seconds:.1f} s"
    minutes, sec = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{sign}{minutes} min {sec} s"
    hours, minutes = divmod(minutes, 60)
    return f"{sign}{hours} h {minutes} min"


def duration_s(value: Any) -> str:
    """Seconds, humanised as :func:`duration_ms` does."""
    number = decimal_of(value)
    return "" if number is None else duration_ms(number * 1000)


def exact_ms(value: Any) -> str:
    """``2,617,400 ms``: the exact value behind a humanised duration (for a title)."""
    number = decimal_of(value)
    return "" if number is None else f"{_plain(number)} ms"


def minor_units(currency: str) -> int:
    return MINOR_UNITS.get(currency.strip().upper(), DEFAULT_MINOR_UNITS)


def money(value: Any, currency: str = "USD") -> str:
    """An amount in ``currency`` by the one rule of the module docstring."""
    number = decimal_of(value)
    if number is None:
        return UNKNOWN if value is None else str(value)
    if number == 0:
        return "0"
    places = minor_units(currency)
    unit = Decimal(1).scaleb(-places)
    if abs(number) >= unit:
        return f"{number.quantize(unit, rounding=ROUND_HALF_UP):,}"
    # below one minor unit: 2 significant digits (never 0)
    exponent = number.adjusted() - (SMALL_SIGNIFICANT - 1)
    return _plain(number.quantize(Decimal(1).scaleb(exponent), rounding=ROUND_HALF_UP))


def money_text(amounts: Any) -> str:
    """``{"USD": "3.50058", "EUR": 1}`` -> ``USD 3.50, EUR 1.00``; ``""`` when there is none."""
    if not isinstance(amounts, dict) or not amounts:
        return ""
    return ", ".join(f"{cur} {money(amount, str(cur))}" for cur, amount in amounts.items())


def cost_text(amounts: Any, calls: Any = 0, currency: str = "USD") -> str:
    """What a cost cell shows, never empty: the amounts (``USD 3.50``, ``USD 0``); with none,
    ``USD 0`` when nothing was called and ``unknown`` when calls reported no cost."""
    text = money_text(amounts)
    if text:
        return text
    return UNKNOWN if (decimal_of(calls) or 0) > 0 else f"{currency} 0"


def exact_money(amounts: Any) -> str:
    """``{"USD": "3.500580000000"}`` -> ``USD 3.50058``: the exact amounts (for a title)."""
    if not isinstance(amounts, dict):
        return ""
    out = []
    for cur, amount in amounts.items():
        number = decimal_of(amount)
        out.append(f"{cur} {_plain(number) if number is not None else amount}")
    return ", ".join(out)
