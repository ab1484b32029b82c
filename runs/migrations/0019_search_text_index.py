"""PostgreSQL: the runs list's text search indexes what model calls asked and answered, not their
JSON text (see ``runs.fields.SEARCH_TEXT_FUNCTION``).

Creates the SQL function ``wb_search_text(body)`` (the string values of a ``model_io`` body's
``summary`` and ``payload``), replaces the trigram index on ``upper(body)`` of migration 0013 by
one on ``upper(wb_search_text(body))`` (partial to ``model_io`` rows, as before), and so drops the
keys, ids, timestamps and numbers from the index: half the trigrams per model call, and a search
for "content" or "token" no longer lists every run that has a model call. The rebuild reads every
``model_io`` body once (about 0.2 ms a body: minutes at millions of model calls).
SQLite: nothing stored (its ``wb_search_text`` is registered on each connection).
"""

from django.db import migrations

from runs.fields import SEARCH_TEXT_FUNCTION

OLD = (
    "CREATE INDEX IF NOT EXISTS event_model_io_body_trgm ON runs_event"
    " USING gin (upper(body) gin_trgm_ops) WHERE type = 'model_io'"
)
NEW = (
    "CREATE INDEX IF NOT EXISTS event_model_io_text_trgm ON runs_event"
    " USING gin (upper(wb_search_text(body)) gin_trgm_ops) WHERE type = 'model_io'"
)


def _has_trgm(cursor) -> bool:
    cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")
    return cursor.fetchone() is not None


def forward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(SEARCH_TEXT_FUNCTION)
        cursor.execute("DROP INDEX IF EXISTS event_model_io_body_trgm")
        if _has_trgm(cursor):  # 0013 said so when it could not create the extension
            cursor.execute(NEW)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("DROP INDEX IF EXISTS event_model_io_text_trgm")
        if _has_trgm(cursor):
            cursor.execute(OLD)
        cursor.execute("DROP FUNCTION IF EXISTS wb_search_text(text)")


class Migration(migrations.Migration):
    dependencies = [("runs", "0018_run_cost_rollup")]

    operations = [migrations.RunPython(forward, backward)]
