"""PostgreSQL only: ``runs_event`` becomes a table partitioned by ``RANGE (run_id)``
(runs.actions.partitions says why by the run's key and how ranges follow the months). SQLite, and
Django's model state, are untouched: the columns, the primary key ``(run_id, seq)`` (it contains the
partition key) and the indexes keep their names and definitions.

The existing table is not copied: it is renamed and ATTACHed as the first partition, ``[MINVALUE,
first free key)``. A CHECK constraint validated first (one read of the table) spares the attach
its own scan, and each index created on the new parent adopts the old table's equivalent index
instead of building one. So the conversion reads the table once and writes nothing but the
catalog, however many events it holds (the migration holds the table's exclusive lock for that
read: seconds for ten million events). Then two empty
ranges are created above it. No foreign key points at ``runs_event`` and its ``run_id`` has none
(migration 0020), so nothing else is recreated.

Self-contained on purpose (no import of the app's code but the migrations' own operations: a
later squash copies it as it is). Not
reversed: the partitioned table serves the previous schema as it is (same columns and indexes).
"""

import re

from django.conf import settings
from django.db import migrations

from runs.migrations._operations import RunPythonOnDatabase

TABLE = "runs_event"
LEGACY = "runs_event_r0"
AHEAD = 2


INDEX = re.compile(
    r"^CREATE (?P<unique>UNIQUE )?INDEX (?P<name>\S+) ON (?:ONLY )?\S+ (?P<rest>USING .*)$", re.S
)


def _own(partition, index):
    """A partition's copy of a parent index: named after both (a plan names the index it reads)."""
    return f"{partition}_{index}"[:63]


def _on(definition, table, name):
    """The ``CREATE INDEX`` statement ``definition`` (pg_get_indexdef) on ``table`` as ``name``."""
    match = INDEX.match(definition)
    return f"CREATE {match['unique'] or ''}INDEX {name} ON {table} {match['rest']}"


def partition_events(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    width = int(getattr(settings, "WORKBENCH_EVENT_PARTITION_RUNS", 1_000_000))
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [TABLE])
        if cursor.fetchone()[0] == "p":
            return  # already partitioned
        cursor.execute(
            "SELECT conname FROM pg_constraint WHERE conrelid = to_regclass(%s) AND contype = 'p'", [TABLE]
        )
        (pkey,) = cursor.fetchone()
        cursor.execute(
            "SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid"
            " WHERE x.indrelid = to_regclass(%s) AND NOT x.indisprimary ORDER BY i.oid",
            [TABLE],
        )
        # in the order they were made (between two indexes of equal cost the planner takes the one
        # made last: the partitions keep the plans of the plain table)
        indexes = cursor.fetchall()
        cursor.execute("SELECT pg_get_serial_sequence('runs_run', 'id')")
        (sequence,) = cursor.fetchone()
        cursor.execute(f"SELECT last_value + CASE WHEN is_called THEN 1 ELSE 0 END FROM {sequence}")
        (next_key,) = cursor.fetchone()
        cursor.execute(f"SELECT COALESCE(MAX(run_id), 0) + 1 FROM {TABLE}")  # orphans included
        first_free = max(next_key, cursor.fetchone()[0], 1)

        cursor.execute(f"ALTER TABLE {TABLE} RENAME TO {LEGACY}")
        cursor.execute(f"ALTER TABLE {LEGACY} RENAME CONSTRAINT {pkey} TO {LEGACY}_pkey")
        for name, _definition in indexes:  # a plan names the index it reads: the parent's is in it
            cursor.execute(f"ALTER INDEX {name} RENAME TO {_own(LEGACY, name)}")
        cursor.execute(
            f"CREATE TABLE {TABLE} (LIKE {LEGACY} INCLUDING DEFAULTS INCLUDING CONSTRAINTS"
            f" INCLUDING STORAGE INCLUDING COMPRESSION, CONSTRAINT {pkey} PRIMARY KEY (run_id, seq))"
            " PARTITION BY RANGE (run_id)"
        )
        cursor.execute(f"ALTER TABLE {LEGACY} ADD CONSTRAINT {LEGACY}_range CHECK (run_id < {first_free})")
        cursor.execute(
            f"ALTER TABLE {TABLE} ATTACH PARTITION {LEGACY} FOR VALUES FROM (MINVALUE) TO ({first_free})"
        )
        cursor.execute(f"ALTER TABLE {LEGACY} DROP CONSTRAINT {LEGACY}_range")
        for _name, definition in indexes:
            cursor.execute(definition)  # adopts the legacy partition's equivalent index
        for step in range(AHEAD + 1):  # the range new runs get their keys in, and AHEAD above it
            low = first_free + step * width
            name = f"runs_event_r{low}"
            cursor.execute(
                f"CREATE TABLE {name} (LIKE {TABLE} INCLUDING DEFAULTS INCLUDING CONSTRAINTS"
                " INCLUDING STORAGE INCLUDING COMPRESSION)"
            )
            for index, definition in indexes:
                cursor.execute(_on(definition, name, _own(name, index)))
            cursor.execute(
                f"ALTER TABLE {TABLE} ATTACH PARTITION {name} FOR VALUES FROM ({low}) TO ({low + width})"
            )
        if first_free > next_key:  # orphan events above the sequence: new runs start above them
            cursor.execute("SELECT setval(%s, %s, true)", [sequence, first_free - 1])
        cursor.execute(f"ANALYZE {TABLE}")


class Migration(migrations.Migration):
    atomic = True

    dependencies = [
        ("runs", "0031_search_text_content"),
    ]

    operations = [
        RunPythonOnDatabase(partition_events, migrations.RunPython.noop, elidable=False),
    ]
