"""Protocol strings in database columns: NUL (U+0000) on PostgreSQL.

The protocol allows any string, U+0000 included (the reference accepts ``"a\\u0000b"`` as a
step id, an artifact key, a tag, a currency ...). PostgreSQL's ``text`` cannot hold NUL, and
``jsonb`` refuses ``\\u0000`` too. The protocol JSON itself is stored as JSON text, where NUL is
the escape ``\\u0000``, so bodies never carry one; the columns beside them (ids, keys, tags,
subject, cost totals ...) hold the strings themselves, and there a NUL is written, on
PostgreSQL only, as ``U+FFFF '0'`` (and U+FFFF itself as ``U+FFFF '1'``): a reversible,
injective spelling, read back by the same fields, so a value round-trips exactly and equal
strings still compare equal in ``WHERE`` clauses. SQLite holds NUL as it is. Values longer
than a column (the protocol sets no length) are cut to its width on PostgreSQL.

The fields deconstruct as Django's own (the column types do not change: no migration).
Raw SQL (the event INSERT/COPY path) spells its values with :func:`column_value`.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import orjson
from django.db import models
from django.db.models import lookups

_NUL = "\x00"
_ESC = "\uffff"
_SPELLED = re.compile("\uffff([01])")


def to_column(text: str) -> str:
    """``text`` as PostgreSQL can store it (unchanged unless it holds NUL or U+FFFF)."""
    if _NUL not in text and _ESC not in text:
        return text
    return text.replace(_ESC, _ESC + "1").replace(_NUL, _ESC + "0")


def from_column(text: str) -> str:
    """The inverse of :func:`to_column`."""
    if _ESC not in text:
        return text
    return _SPELLED.sub(lambda m: _NUL if m.group(1) == "0" else _ESC, text)


def fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, distinct texts staying distinct: a cut text ends in
    U+FFFF '#' and 15 hex digits of its SHA-256, so two long keys that share their first
    characters still satisfy a unique constraint, and a lookup of the same long value (cut the
    same way) still finds it."""
    if len(text) <= width:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:15]
    return text[: width - 17] + _ESC + "#" + digest


def column_value(value: Any, connection: Any, width: int | None = None) -> Any:
    """A string bound by raw SQL, as the fields below would write it on ``connection``
    (``width``: the column's, for PostgreSQL's ``varchar(n)``)."""
    if isinstance(value, str) and connection.vendor == "postgresql":
        value = to_column(value)
        return value if width is None else fit(value, width)
    return value


def _walk(value: Any, spell) -> Any:
    if isinstance(value, str):
        return spell(value)
    if isinstance(value, dict):
        return {spell(k) if isinstance(k, str) else k: _walk(v, spell) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_walk(v, spell) for v in value]
    return value


class ProtocolCharField(models.CharField):
    """A ``CharField`` that holds any protocol string (NUL included) on PostgreSQL too.

    Lookups (``filter(run_id=...)``) spell their value the same way, so a NUL in a URL or a
    query is simply not found instead of a database error. On PostgreSQL, whose ``varchar(n)``
    refuses longer text, a value longer than the column is cut to its width by :func:`fit`
    (lookups are cut alike, so they still find it): these columns serve filtering and display,
    and whatever must come back exactly is read from the stored protocol JSON beside them.
    SQLite keeps the whole value.
    """

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        value = super().get_db_prep_value(value, connection, prepared)
        return column_value(value, connection, self.max_length)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if isinstance(value, str) and connection.vendor == "postgresql":
            return from_column(value)
        return value

    def deconstruct(self) -> tuple[Any, str, Any, Any]:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.CharField", args, kwargs


class _SpelledPattern:
    """``contains``/``startswith``... whose needle is spelt as the column is (a NUL in a search
    box finds what holds one, instead of failing on PostgreSQL)."""

    def get_db_prep_lookup(self, value: Any, connection: Any) -> tuple[str, list[Any]]:
        return "%s", [column_value(value, connection)]  # a part of a value: spelt, never cut


for _pattern in (
    lookups.Contains,
    lookups.IContains,
    lookups.StartsWith,
    lookups.IStartsWith,
    lookups.EndsWith,
    lookups.IEndsWith,
):
    ProtocolCharField.register_lookup(type(_pattern.__name__, (_SpelledPattern, _pattern), {}))


def json_text_needle(text: str) -> str:
    """A search term for columns of JSON *text* (event bodies, run documents): a NUL is found as
    the escape the JSON text holds (``\\u0000``), on every database."""
    return text.replace(_NUL, "\\u0000")


class ProtocolJSONField(models.JSONField):
    """A ``JSONField`` whose strings (keys included) may hold NUL on PostgreSQL's jsonb too."""

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if connection.vendor == "postgresql" and not hasattr(value, "resolve_expression"):
            value = _walk(value, to_column)
        return super().get_db_prep_value(value, connection, prepared)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        value = super().from_db_value(value, expression, connection)
        if connection.vendor == "postgresql":
            return _walk(value, from_column)
        return value

    def deconstruct(self) -> tuple[Any, str, Any, Any]:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs


# --- the text a model call is searched by -------------------------------------------------------
#
# The runs list's text search finds a run by what its model calls asked and answered: the string
# values of a ``model_io`` event's ``summary`` and ``payload`` (less :data:`NOT_SEARCHED`), never
# the JSON keys (``role``, ``content``, ``usage``...), the envelope (ids, timestamps) or the numbers. Searching the body's
# JSON text instead found every run with a model call for "content" or "token", and indexing all
# of it cost every model_io insert twice the trigrams. The same extraction on both databases:
# ``wb_search_text(body)`` is a SQL function on PostgreSQL (migration 0019, which indexes
# ``upper(wb_search_text(body))`` with pg_trgm) and a Python function registered on each SQLite
# connection (``register_search_text``). Values are joined by a newline; a NUL in a value is the
# six characters ``\u0000`` (as :func:`json_text_needle` spells it); a body that does not parse (a lone
# surrogate escape, jsonb's limits) is searched as its JSON text, as before.

# A payload's top-level keys left out of the search text (issue 53): a provider's response id
# (random text: dozens of trigrams no search shares, a third of a model call's index entries) and
# the pricing provenance Workbench adds (the same few words on every priced call). Both stay in
# the stored event; the runs list's search only does not match them.
NOT_SEARCHED = frozenset({"responseId", "workbench.pricing"})

# PARALLEL UNSAFE: its exception block is a subtransaction, which no process of a parallel query
# (its leader included) may start ("cannot start subtransactions during a parallel operation").
SEARCH_TEXT_FUNCTION = r"""
CREATE OR REPLACE FUNCTION wb_search_text(body text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL UNSAFE COST 1000 AS $f$
DECLARE doc jsonb; payload jsonb;
BEGIN
  IF strpos(body, '\u0000') > 0 THEN  -- jsonb refuses NUL: keep an unescaped \u0000 as its text
    body := regexp_replace(body, '(?<!\\)((?:\\\\)*)\\u0000', '\1\\\\u0000', 'g');
  END IF;
  BEGIN
    doc := body::jsonb;
  EXCEPTION WHEN others THEN
    RETURN body;
  END;
  payload := doc -> 'payload';
  IF jsonb_typeof(payload) = 'object' THEN  -- ids and provenance, not what was asked or answered
    payload := payload - 'responseId' - 'workbench.pricing';
  END IF;
  RETURN concat_ws(E'\n',
    CASE WHEN jsonb_typeof(doc -> 'summary') = 'string' THEN doc ->> 'summary' END,
    (SELECT string_agg(v #>> '{}', E'\n')
       FROM jsonb_path_query(payload, 'strict $.** ? (@.type() == "string")', '{}', true) AS v));
END
$f$
"""


def search_text(body: str) -> str:
    """What ``wb_search_text(body)`` returns, in Python (SQLite's function; tests)."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body
    if not isinstance(doc, dict):
        return ""
    parts: list[str] = []
    if isinstance(doc.get("summary"), str):
        parts.append(doc["summary"])
    payload = doc.get("payload")
    if isinstance(payload, dict):
        payload = {key: value for key, value in payload.items() if key not in NOT_SEARCHED}
    stack = [payload]
    while stack:  # not recursive: a payload may nest as deep as the protocol allows
        value = stack.pop()
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, dict):
            stack.extend(reversed(value.values()))
        elif isinstance(value, list):
            stack.extend(reversed(value))
    return "\n".join(parts).replace(_NUL, "\\u0000")


def register_search_text(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created`` receiver: SQLite connections get ``wb_search_text``."""
    if connection.vendor == "sqlite":
        connection.connection.create_function("wb_search_text", 1, search_text, deterministic=True)


class SearchText(models.Func):
    """``wb_search_text(<body>)``: the searchable text of a model call (see above)."""

    function = "wb_search_text"
    output_field = models.TextField()


def json_body_needle(text: str) -> str | None:
    """``text`` as the JSON text of a body that holds it in a string value spells it (quotes and
    backslashes escaped...), or None when it cannot be spelt (a lone surrogate). A body whose text
    lacks it cannot hold ``text`` in any value: a cheap test before :class:`SearchText`."""
    try:
        return orjson.dumps(text).decode()[1:-1]
    except orjson.JSONEncodeError:
        return None
