"""The test database of each pytest(-xdist) worker, copied from a migrated template.

Running the migrations (every app's: about seventy, ours squashed) is the slow part of creating a
test database; every worker of every pytest run did it. Here the first worker that needs the
database migrates it as pytest-django does, and keeps a copy as a template named by a hash of
every migration file (and the Django version): the other workers, and later runs while the
migrations do not change, copy the template and let `migrate` find nothing to apply.

- SQLite: the template is a file in var/ (``test-template-<hash>.sqlite3``), copied to the
  worker's test database file.
- PostgreSQL: the template is a database (``test_tpl_<hash>``), copied by
  ``CREATE DATABASE ... TEMPLATE``; older templates are dropped when a new one is made.

A file lock (var/ for SQLite, one per PostgreSQL server in the temporary folder, as checkouts
share templates by their hash) makes one worker build while the others wait, and serializes the
copies (PostgreSQL copies a template only while nobody else uses it). Anything else (no migrations,
--reuse-db, several database aliases, an in-memory database) goes the plain pytest-django way.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from contextlib import closing, contextmanager
from importlib import import_module
from pathlib import Path

import django
from django.apps import apps
from django.conf import settings
from django.db import connections
from django.db.migrations.loader import MigrationLoader
from django.test.utils import setup_databases

REPO = Path(__file__).resolve().parent.parent


def migrations_key() -> str:
    """A hash of every installed app's migration files (MIGRATION_MODULES' where it names them: the
    vendored ones) and the Django version."""
    digest = hashlib.sha256(django.get_version().encode())
    for app in sorted(apps.get_app_configs(), key=lambda a: a.label):
        try:
            package = import_module(MigrationLoader.migrations_module(app.label)[0] or "")
        except (ImportError, ValueError):  # no migrations (ValueError: MIGRATION_MODULES says None)
            continue
        folder = Path(package.__file__).parent
        for path in sorted(folder.glob("*.py")):
            digest.update(f"{app.label}/{path.name}".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def usable(aliases: set[str]) -> bool:
    if set(aliases) != {"default"} or len(settings.DATABASES) != 1:
        return False
    vendor = connections["default"].vendor
    if vendor == "sqlite":
        return connections["default"].creation._get_test_db_name() not in (":memory:", "")
    return vendor == "postgresql"


def _sqlite_files(name: str) -> list[Path]:
    return [Path(name + suffix) for suffix in ("", "-wal", "-shm", "-journal")]


def setup_from_template(*, verbosity: int, serialized_aliases) -> list:
    """setup_databases for "default", from (or making) the template. Returns its old config."""
    connection = connections["default"]
    key = migrations_key()
    var = Path(settings.VAR_DIR)
    if connection.vendor == "sqlite":
        with _locked(var / "test-template-sqlite.lock"):
            return _sqlite(connection, var / f"test-template-{key}.sqlite3", verbosity, serialized_aliases)
    # One lock for the server, whichever checkout runs: templates are shared by their hash.
    server = f"{connection.settings_dict['HOST'] or 'local'}-{connection.settings_dict['PORT'] or 5432}"
    with _locked(Path(tempfile.gettempdir()) / f"workbench-test-template-pg-{server}.lock"):
        return _postgres(connection, f"test_tpl_{key}", verbosity, serialized_aliases)


def _setup(verbosity: int, serialized_aliases, *, keepdb: bool) -> list:
    return setup_databases(
        verbosity=verbosity,
        interactive=False,
        aliases={"default"},
        serialized_aliases=serialized_aliases,
        keepdb=keepdb,
    )


def _sqlite(connection, template: Path, verbosity: int, serialized_aliases) -> list:
    test_name = connection.creation._get_test_db_name()
    for path in _sqlite_files(test_name):
        path.unlink(missing_ok=True)
    if template.is_file():
        shutil.copyfile(template, test_name)
        return _setup(verbosity, serialized_aliases, keepdb=True)
    old = _setup(verbosity, serialized_aliases, keepdb=False)
    with connection.cursor() as cursor:  # the WAL into the main file, so one file is the whole database
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for stale in template.parent.glob("test-template-*.sqlite3"):
        stale.unlink(missing_ok=True)
    partial = template.with_suffix(".partial")
    shutil.copyfile(test_name, partial)
    partial.replace(template)
    return old


def _postgres(connection, template: str, verbosity: int, serialized_aliases) -> list:
    test_name = connection.creation._get_test_db_name()
    quote = connection.ops.quote_name
    with connection._nodb_cursor() as cursor:
        cursor.execute("SELECT datname FROM pg_database WHERE datname LIKE 'test_tpl_%%'")
        templates = {row[0] for row in cursor.fetchall()}
        if template in templates:
            cursor.execute(f"DROP DATABASE IF EXISTS {quote(test_name)} WITH (FORCE)")
            cursor.execute(f"CREATE DATABASE {quote(test_name)} TEMPLATE {quote(template)}")
    if template in templates:
        return _setup(verbosity, serialized_aliases, keepdb=True)
    old = _setup(verbosity, serialized_aliases, keepdb=False)
    connection.close()
    with connection._nodb_cursor() as cursor:
        for stale in templates:
            cursor.execute(f"DROP DATABASE IF EXISTS {quote(stale)} WITH (FORCE)")
        cursor.execute(f"CREATE DATABASE {quote(template)} TEMPLATE {quote(test_name)}")
    return old


def copy_migrated_sqlite(dest: Path, env: dict[str, str]) -> None:
    """``dest``: a SQLite database with every migration applied, for a server a test starts (the
    browser tests' daphne): copied from a template that ``manage.py migrate`` made once, in the
    environment ``env`` (var/test-migrated-<hash>.sqlite3)."""
    var = REPO / "var"
    template = var / f"test-migrated-{migrations_key()}.sqlite3"
    with _locked(var / "test-migrated.lock"):
        if not template.is_file():
            partial = template.with_suffix(".partial")
            for path in _sqlite_files(str(partial)):
                path.unlink(missing_ok=True)
            subprocess.run(
                [sys.executable, "manage.py", "migrate", "-v0"],
                cwd=REPO,
                env={**env, "DATABASE_URL": f"sqlite:///{partial}"},
                check=True,
            )
            with closing(sqlite3.connect(partial)) as db:  # the WAL into the main file
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            for stale in var.glob("test-migrated-*.sqlite3"):
                stale.unlink(missing_ok=True)
            partial.replace(template)
            for path in _sqlite_files(str(partial))[1:]:
                path.unlink(missing_ok=True)
    for path in _sqlite_files(str(dest)):
        path.unlink(missing_ok=True)
    shutil.copyfile(template, dest)
