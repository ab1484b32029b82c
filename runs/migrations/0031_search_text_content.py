"""PostgreSQL: the search text of a model call leaves out its payload's ``responseId`` and
``workbench.pricing`` (``runs.fields.NOT_SEARCHED``; issue 53: a provider's random response id
was about a third of a model call's trigram entries). Replaces ``wb_search_text`` and rebuilds
the index on it (an IMMUTABLE function's index must be rebuilt when the function changes: it
reads every ``model_io`` body once). SQLite: nothing stored (its function is Python's)."""

from django.db import migrations

from runs.fields import SEARCH_TEXT_FUNCTION
from runs.migrations._operations import RunPythonOnDatabase

# 0019's function, for the way back
OLD_FUNCTION = r"""
CREATE OR REPLACE FUNCTION wb_search_text(body text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL UNSAFE COST 1000 AS $f$
DECLARE doc jsonb;
BEGIN
  IF strpos(body, '\u0000') > 0 THEN  -- jsonb refuses NUL: keep an unescaped \u0000 as its text
    body := regexp_replace(body, '(?<!\\)((?:\\\\)*)\\u0000', '\1\\\\u0000', 'g');
  END IF;
  BEGIN
    doc := body::jsonb;
  EXCEPTION WHEN others THEN
    RETURN body;
  END;
  RETURN concat_ws(E'\n',
    CASE WHEN jsonb_typeof(doc -> 'summary') = 'string' THEN doc ->> 'summary' END,
    (SELECT string_agg(v #>> '{}', E'\n')
       FROM jsonb_path_query(doc, 'strict $.payload.** ? (@.type() == "string")', '{}', true) AS v));
END
$f$
"""


def _replace(schema_editor, function: str) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(function)
        cursor.execute("SELECT relkind FROM pg_class WHERE relname = 'event_model_io_text_trgm' AND relkind IN ('i', 'I')")
        found = cursor.fetchone()
        if found is None:
            return
        if found[0] == "i":
            cursor.execute("REINDEX INDEX event_model_io_text_trgm")
            return
        # partitioned (0032): a partitioned index cannot be reindexed inside a transaction, each
        # partition's index can (the way back from 0032 and later, when the event table is partitioned)
        cursor.execute("SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'event_model_io_text_trgm'::regclass")
        for (child,) in cursor.fetchall():
            cursor.execute(f"REINDEX INDEX {child}")


def forward(apps, schema_editor):
    _replace(schema_editor, SEARCH_TEXT_FUNCTION)


def backward(apps, schema_editor):
    _replace(schema_editor, OLD_FUNCTION)


class Migration(migrations.Migration):
    dependencies = [("runs", "0030_slack_links")]

    operations = [RunPythonOnDatabase(forward, backward)]
