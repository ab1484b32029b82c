"""Locale-aware ordering of labels, as the reference runtime sorts them.

The reference sorts telemetry rollups and exported artifacts / rule sets with
JavaScript's ``String.prototype.localeCompare`` under ICU's ``en-US`` locale (no
tailoring, so CLDR root collation: three levels, punctuation not ignorable, lowercase
before uppercase at the tertiary level).

:func:`collation_key` returns a sort key that reproduces that order:

* With ICU available (the ``pyicu-wheels`` distribution, import name ``icu``, bundles ICU
  77) the key is ICU's own sort key for ``en-US`` at the default (tertiary) strength,
  which is what V8's ``localeCompare`` compares. The reference corpus was made with ICU 78;
  the two CLDR versions agree for everything we have seen.
* Without ICU an approximation is used (:func:`approximate_collation_key`): characters are
  grouped as ICU root groups them (whitespace < punctuation < symbols < currency signs <
  digits < letters), ASCII punctuation and symbols follow the CLDR root order, letters
  compare case- and accent-insensitively first, then by accents, then lowercase before
  uppercase. It differs from ICU for scripts other than Latin (ordered by code point
  instead of by ICU's script order and, for Han, radical-stroke order), for contractions
  and expansions (``æ``, ``ß``, Danish ``aa``), and digits compare by value of each digit
  only. Equal keys keep their input order (Python's sort is stable, like JavaScript's).
"""

from __future__ import annotations

import threading
import unicodedata
from typing import Any

try:  # pragma: no cover - exercised when the optional ICU wheel is installed
    import icu as _icu
except ImportError:  # pragma: no cover - exercised when it is not
    _icu = None

ICU_AVAILABLE = _icu is not None

_local = threading.local()


def _icu_collator() -> Any:
    collator = getattr(_local, "collator", None)
    if collator is None:
        collator = _icu.Collator.createInstance(_icu.Locale("en-US"))
        _local.collator = collator
    return collator


def collation_key(text: str) -> bytes | tuple[Any, ...]:
    """Sort key ordering strings like ``a.localeCompare(b)`` does in the reference (ICU en-US)."""
    if _icu is not None:
        sort_key: bytes = _icu_collator().getSortKey(text)
        return sort_key
    return approximate_collation_key(text)


def locale_sorted(items: list[Any], key: Any = None) -> list[Any]:
    """``sorted`` by :func:`collation_key` of ``key(item)`` (the item itself by default); stable."""
    if key is None:
        return sorted(items, key=collation_key)
    return sorted(items, key=lambda item: collation_key(key(item)))


# --- pure-Python approximation of CLDR root collation -------------------------------

# ASCII punctuation and symbols in CLDR root order (non-ignorable "variable" characters
# first, then symbols, then the currency sign).
_ASCII_ORDER = "\t\n\x0b\x0c\r _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$"
_ASCII_RANK = {ch: i for i, ch in enumerate(_ASCII_ORDER)}

_GROUP_SPACE = 1
_GROUP_PUNCT = 2
_GROUP_SYMBOL = 3
_GROUP_CURRENCY = 4
_GROUP_DIGIT = 5
_GROUP_LATIN = 6
_GROUP_OTHER_LETTER = 7


def _primary(ch: str) -> tuple[int, int] | None:
    rank = _ASCII_RANK.get(ch)
    if rank is not None:
        if ch == "$":
            return (_GROUP_CURRENCY, 0)
        group = _GROUP_SPACE if rank <= 5 else (_GROUP_PUNCT if rank <= 22 else _GROUP_SYMBOL)
        return (group, rank)
    cat = unicodedata.category(ch)
    if cat in ("Cc", "Cf", "Mn", "Me"):
        return None  # completely ignorable at the primary level
    if cat == "Nd":
        return (_GROUP_DIGIT, unicodedata.digit(ch, 0))
    if cat[0] == "Z":
        return (_GROUP_SPACE, 100 + ord(ch))
    if cat[0] == "P":
        return (_GROUP_PUNCT, 100 + ord(ch))
    if cat == "Sc":
        return (_GROUP_CURRENCY, 100 + ord(ch))
    if cat[0] == "S":
        return (_GROUP_SYMBOL, 100 + ord(ch))
    if cat[0] == "N":
        return (_GROUP_DIGIT, 100 + ord(ch))
    base = ch.lower()
    if "a" <= base <= "z":
        return (_GROUP_LATIN, ord(base))
    return (_GROUP_OTHER_LETTER, ord(base))


def approximate_collation_key(text: str) -> tuple[Any, ...]:
    """A three-level key approximating ICU root collation without ICU (see module doc)."""
    primary: list[tuple[int, int]] = []
    secondary: list[int] = []
    tertiary: list[int] = []
    for ch in unicodedata.normalize("NFD", text):
        cat = unicodedata.category(ch)
        if cat in ("Mn", "Me"):
            # A combining mark weighs on the previous character's secondary level.
            if secondary:
                secondary[-1] = secondary[-1] * 1000 + ord(ch) % 1000
            continue
        weight = _primary(ch)
        if weight is None:
            continue
        primary.append(weight)
        secondary.append(0)
        tertiary.append(1 if ch != ch.lower() else 0)
    return (tuple(primary), tuple(secondary), tuple(tertiary))
