"""PostgreSQL: trigram indexes for the runs list's text search (pg_trgm).

The search matches ``UPPER(column) LIKE UPPER('%text%')`` (Django's ``icontains``) on the run's id,
title and workflow id, and on the bodies of its ``model_io`` events (what was asked and answered).
Without an index the event side reads every model_io body of the database; a GIN trigram index
on ``upper(body)``, partial to ``model_io`` rows, answers it from the index. Where the extension
cannot be created (no privilege), the migration says so and goes on: search works, unindexed.
SQLite: nothing (it has no trigram index; the embedded profile's workspaces are small).
"""

from django.db import migrations

INDEXES = {
    "event_model_io_body_trgm": (
        "CREATE INDEX IF NOT EXISTS event_model_io_body_trgm ON runs_event"
        " USING gin (upper(body) gin_trgm_ops) WHERE type = 'model_io'"
    ),
    "run_search_trgm": (
        "CREATE INDEX IF NOT EXISTS run_search_trgm ON runs_run USING gin"
        " (upper(run_id::text) gin_trgm_ops, upper(title::text) gin_trgm_ops,"
        " upper(workflow_id::text) gin_trgm_ops)"
    ),
}


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "DO $$ BEGIN CREATE EXTENSION IF NOT EXISTS pg_trgm;"
            " EXCEPTION WHEN insufficient_privilege THEN"
            " RAISE WARNING 'pg_trgm could not be created: the runs search runs without its index';"
            " END $$"
        )
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")
        if cursor.fetchone() is None:
            return
        for sql in INDEXES.values():
            cursor.execute(sql)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for name in INDEXES:
            cursor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [("runs", "0012_list_indexes")]

    operations = [migrations.RunPython(create, drop)]
