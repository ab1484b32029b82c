"""The squashed migrations (issue 53): each app's migrations in one, for a fresh database.

- Each squashed migration replaces every older migration of its app (a migration added after the
  squash depends on the squashed one and is not replaced).
- An empty database migrated by the old chain and one migrated by the squashed chain have the same
  schema and seed rows: on SQLite, and on PostgreSQL (its trigram indexes, the ``wb_search_text``
  function, the extension) in ``make test-postgres``; and databases migrated by the old chain,
  all of it or partway, migrate on with the tree as it is and then show every migration applied,
  the squashed ones included (scripts/migration_schema.py check).
- The same holds for the contrib and library apps whose migrations are vendored and squashed
  (workbench/vendored_migrations/, tests/ops/test_vendored_migrations.py): their old chain is the
  copies of the libraries' files, databases partway through them migrate on too.
"""

from __future__ import annotations

import os

from django.db import connection
from django.db.migrations.loader import MigrationLoader

from tests.scripts import run_script

SQUASHED_APPS = ["accounts", "evals", "judges", "playground", "review", "runs"]


def _number(name: str) -> int:
    return int(name.split("_", 1)[0])


def test_each_squashed_migration_replaces_every_older_migration_of_its_app():
    loader = MigrationLoader(None, ignore_no_migrations=True)
    for app in SQUASHED_APPS:
        migrations = {name: m for (label, name), m in loader.disk_migrations.items() if label == app}
        squashed = [m for m in migrations.values() if m.replaces]
        assert len(squashed) == 1, app
        squash = squashed[0]
        last = squash.name.split("_squashed_", 1)[1]
        older = sorted(n for n in migrations if n != squash.name and _number(n) <= _number(last))
        assert sorted(name for label, name in squash.replaces) == older, app
        assert {label for label, _ in squash.replaces} == {app}
        assert older[-1] == last, app  # the name says up to which one


def _database_args() -> list[str]:
    if connection.vendor == "postgresql":
        return ["--postgres", os.environ["DATABASE_URL"]]
    return ["--sqlite"]


def test_the_squashed_chain_builds_the_old_schema_and_old_databases_migrate_on():
    proc = run_script("migration_schema.py", "check", *_database_args())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "the same schema" in proc.stdout
    assert "old databases migrate on" in proc.stdout
    if connection.vendor == "postgresql":  # 0019's wb_search_text is there, by both chains
        assert "1 functions" in proc.stdout
