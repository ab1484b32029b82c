"""PostgreSQL: a GIN index of the runs' tags, for the runs list's tag filter (issue 53).

The filter was a LIKE on the tags' JSON text, which no index answers: a rare tag (or one no run
has) read every run of the workspace to find a page, 2 s at 1,000,000 runs (bench_scale). It is
now jsonb containment (``tags @> '["tag"]'``, runs.selectors.run_list._with_tag), answered by this
index (jsonb_path_ops: the smallest GIN opclass that serves ``@>``; 3.5 MB at 1M runs). A common
tag is still read through the workspace's newest-first index, as the planner chooses.
SQLite: nothing (the filter stays a LIKE; the embedded profile's workspaces are small).
"""

from django.db import migrations

from runs.migrations._operations import RunPythonOnDatabase

CREATE = "CREATE INDEX IF NOT EXISTS run_tags_gin ON runs_run USING gin (tags jsonb_path_ops)"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS run_tags_gin")


class Migration(migrations.Migration):
    dependencies = [("runs", "0032_event_partitions")]

    operations = [RunPythonOnDatabase(create, drop)]
