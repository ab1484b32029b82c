#!/usr/bin/env python3
"""The squashed migrations build the same schema as the migrations they replace (issue 53).

Each app's migrations are squashed into one (``<app>/migrations/0001_squashed_*.py``, whose
``replaces`` names every older migration of the app), and so are those of Django's contrib apps
and of the libraries' apps (``workbench/vendored_migrations/<app>/``, next to exact copies of
theirs: scripts/vendor_migrations.py). A fresh database applies the squashed one; a database
partway through the old chain finishes it with the old files, still in the tree.

    scripts/migration_schema.py check [--sqlite] [--postgres URL]
    scripts/migration_schema.py dump --chain old|squashed   (DATABASE_URL: an empty database)
    scripts/migration_schema.py old [--to APP:MIGRATION ...]  (DATABASE_URL's database)

``check`` migrates three empty databases per database server, each in a child process of its own
(``dump`` and ``old``): one by the old chain, one by the squashed chain, one by the old chain up
to PARTWAY. It prints the differences between the first two schemas, then runs ``manage.py
migrate`` on the first and the third with the tree as it is: it must apply what is left without
error (nothing, on the first), and ``showmigrations`` must then show every migration applied,
the squashed ones included (Django records a squashed migration applied once all it replaces
are). The second database then migrates back to before the squashed migrations and forward
again. Exit status 1 on any difference or problem. With neither option it checks SQLite, and
PostgreSQL at ``PG_URL`` when that is set (``scripts/services.py run --`` sets it). The
PostgreSQL databases are created next to that URL's database and dropped afterwards.

What is compared, column order aside (the old chain appends the columns it adds later):
- SQLite: every table's column and constraint clauses (its CREATE TABLE statement split at the
  top level), every index, trigger and view statement;
- PostgreSQL: the columns (type, length, precision, nullability, default, identity), every
  constraint's and index's definition (``pg_get_constraintdef``, ``pg_indexes``), the extensions,
  the functions and triggers outside extensions, and the sequences;
- both: the rows the migrations wrote (seed data such as the playground's default providers and
  prices), ids, foreign keys and timestamps aside.

The old chain is applied by a migration loader that leaves out every migration with ``replaces``,
which is what Django does for a database that has some of the replaced migrations applied.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import django
import psycopg
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader

ROOT = Path(__file__).resolve().parent.parent

Schema = dict[str, Any]


# ------------------------------------------------------------------------------------------------
# one database: migrate it by one path, then describe its schema


class OldChainLoader(MigrationLoader):
    """Django's loader without the squashing migrations: the replaced ones are the graph."""

    def load_disk(self) -> None:
        super().load_disk()
        last = {key: tuple(m.replaces[-1]) for key, m in self.disk_migrations.items() if m.replaces}
        for key in last:
            del self.disk_migrations[key]
        for migration in self.disk_migrations.values():  # a later migration's, as Django remaps it
            migration.dependencies = [last.get(tuple(dep), dep) for dep in migration.dependencies]


def migrate(chain: str, to: list[tuple[str, str]] | None = None) -> None:
    """Apply the migrations to the default database by ``chain`` ("old" or "squashed"): every
    one, or those up to the migrations ``to`` ((app, name) pairs)."""
    executor = MigrationExecutor(connection)
    if chain == "old":
        executor.loader = OldChainLoader(connection)
    squashed = [key for key, m in executor.loader.disk_migrations.items() if m.replaces]
    if chain == "squashed" and not squashed:
        raise SystemExit("no squashed migration found")
    targets = to or executor.loader.graph.leaf_nodes()
    executor.migrate(targets, plan=executor.migration_plan(targets))


def _split_top_level(body: str) -> list[str]:
    """``a, b (c, d), e`` -> ``["a", "b (c, d)", "e"]`` (quotes and parentheses respected)."""
    parts, depth, quote, current = [], 0, "", []
    for char in body:
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"`":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return [_normal(p) for p in parts if p.strip()]


def _normal(sql: str) -> str:
    sql = re.sub(r"\s+", " ", sql).strip()
    return re.sub(r"\(\s+", "(", re.sub(r"\s+\)", ")", sql))


def sqlite_schema(cursor: Any) -> Schema:
    cursor.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master"
        " WHERE name NOT LIKE 'sqlite_%' AND sql IS NOT NULL ORDER BY type, name"
    )
    schema: Schema = {"table": {}, "index": {}, "trigger": {}, "view": {}}
    for kind, name, table, sql in cursor.fetchall():
        if kind == "table":
            body = sql[sql.index("(") + 1 : sql.rindex(")")]
            schema["table"][name] = sorted(_split_top_level(body))
        else:
            schema[kind][name] = [table, _normal(sql)]
    return schema


PG_QUERIES = {
    "columns": (
        "SELECT table_name, column_name, data_type, character_maximum_length, numeric_precision,"
        " numeric_scale, is_nullable, column_default, is_identity, identity_generation"
        " FROM information_schema.columns WHERE table_schema = current_schema()"
    ),
    "constraints": (
        "SELECT conrelid::regclass::text, conname, contype, pg_get_constraintdef(oid)"
        " FROM pg_constraint WHERE connamespace = current_schema()::regnamespace"
    ),
    "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()",
    "extensions": "SELECT extname FROM pg_extension",
    "functions": (
        "SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p"
        " WHERE p.pronamespace = current_schema()::regnamespace AND NOT EXISTS"
        " (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')"
    ),
    "triggers": (
        "SELECT tgrelid::regclass::text, tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal"
    ),
    "sequences": (
        "SELECT sequencename, data_type::text, start_value, increment_by, max_value, cycle"
        " FROM pg_sequences WHERE schemaname = current_schema()"
    ),
}


def postgres_schema(cursor: Any) -> Schema:
    schema: Schema = {}
    for name, sql in PG_QUERIES.items():
        cursor.execute(sql)
        schema[name] = sorted([str(v) for v in row] for row in cursor.fetchall())
    return schema


def _setup() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
    django.setup()


def dump(chain: str) -> Schema:
    _setup()
    migrate(chain)
    with connection.cursor() as cursor:
        schema = sqlite_schema(cursor) if connection.vendor == "sqlite" else postgres_schema(cursor)
        schema["rows"] = seed_rows(cursor)
    return schema


def seed_rows(cursor: Any) -> dict[str, list[list[str]]]:
    """The rows the migrations wrote (seed data), per table, but for the migration history itself,
    the ids (the order of inserts may differ) and the timestamps (``*_at``)."""
    rows = {}
    for table in sorted(connection.introspection.table_names(cursor)):
        if table == "django_migrations":
            continue
        cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
        names = [c[0] for c in cursor.description]
        found = sorted(
            [
                f"{n}={v}"
                for n, v in zip(names, row, strict=True)
                if n != "id" and not n.endswith(("_id", "_at"))
            ]
            for row in cursor.fetchall()
        )
        if found:
            rows[table] = [json.dumps(r) for r in found]
    return rows


# ------------------------------------------------------------------------------------------------
# comparison: both paths on fresh databases


def _child_env(database_url: str, var_dir: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL",)}
    env.update(
        DATABASE_URL=database_url, WORKBENCH_VAR_DIR=var_dir, DJANGO_SETTINGS_MODULE="workbench.settings"
    )
    return env


def dump_in_child(chain: str, database_url: str, var_dir: str) -> Schema:
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "dump", "--chain", chain],
        cwd=ROOT,
        env=_child_env(database_url, var_dir),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode:
        raise RuntimeError(f"migrating by the {chain} chain failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout)


def differences(old: Schema, new: Schema) -> list[str]:
    """What one schema has that the other has not, one line each (empty: the same)."""
    lines = []
    for section in sorted(set(old) | set(new)):
        a, b = old.get(section), new.get(section)
        if isinstance(a, dict) or isinstance(b, dict):
            a, b = a or {}, b or {}
            for key in sorted(set(a) | set(b)):
                if a.get(key) != b.get(key):
                    if (
                        isinstance(a.get(key), list)
                        and isinstance(b.get(key), list)
                        and section in ("table", "rows")
                    ):
                        for item in sorted(set(a[key]) - set(b[key])):
                            lines.append(f"{section} {key}: only in the old chain: {item}")
                        for item in sorted(set(b[key]) - set(a[key])):
                            lines.append(f"{section} {key}: only in the squashed chain: {item}")
                    else:
                        lines.append(f"{section} {key}: old {a.get(key)!r} squashed {b.get(key)!r}")
        else:
            sa = {json.dumps(r) for r in a or []}
            sb = {json.dumps(r) for r in b or []}
            lines += [f"{section}: only in the old chain: {r}" for r in sorted(sa - sb)]
            lines += [f"{section}: only in the squashed chain: {r}" for r in sorted(sb - sa)]
    return lines


def _pg_admin(url: str, statement: str) -> None:
    base = url.split("?", 1)[0].rsplit("/", 1)[0].replace("postgres://", "postgresql://", 1)
    with psycopg.connect(base + "/postgres", autocommit=True, connect_timeout=10) as con:
        con.execute(statement)


@contextlib.contextmanager
def fresh_databases(postgres_url: str | None, count: int) -> Iterator[tuple[list[str], str]]:
    """``count`` new empty databases (their URLs) and a var folder: SQLite files in a temporary
    folder, or PostgreSQL databases next to ``postgres_url``'s, dropped afterwards."""
    with tempfile.TemporaryDirectory(prefix="wb-squash-") as tmp:
        if postgres_url is None:
            urls = []
            for n in range(count):
                (Path(tmp) / str(n)).mkdir()
                urls.append(f"sqlite:///{tmp}/{n}/db.sqlite3")
            yield urls, tmp
            return
        base, name = postgres_url.split("?", 1)[0].rsplit("/", 1)
        names = [f"{name}_squash{n}_{os.getpid()}" for n in range(count)]
        for db in names:
            _pg_admin(postgres_url, f'DROP DATABASE IF EXISTS "{db}"')
            _pg_admin(postgres_url, f'CREATE DATABASE "{db}"')
        try:
            yield [f"{base}/{db}" for db in names], tmp
        finally:
            for db in names:
                _pg_admin(postgres_url, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


# A database partway through the old chain (what an install upgraded now and then may have): our
# apps', and the libraries' chains (their copies in workbench/vendored_migrations/).
PARTWAY = [
    "runs:0020_event_run_no_db_constraint",
    "playground:0005_user_playground",
    "auth:0008_alter_user_username_max_length",
    "admin:0002_logentry_remove_auto_add",
    "oauth2_provider:0012_add_token_checksum",
    "django_tasks_database:0010_alter_dbtaskresult_status",
]
VENDORED_APPS = sorted(
    p.name for p in (ROOT / "workbench" / "vendored_migrations").iterdir() if (p / "__init__.py").is_file()
)
SQUASHED_APPS = ["accounts", "evals", "judges", "playground", "review", "runs", *VENDORED_APPS]


def _manage(args: list[str], database_url: str, var_dir: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(ROOT / "manage.py"), *args]
    env = _child_env(database_url, var_dir)
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)


def migrate_on(database_url: str, var_dir: str, label: str, whole: bool) -> list[str]:
    """``manage.py migrate`` on a database the old chain migrated (``whole``: all of it): the
    problems found. It must apply what is left (nothing when ``whole``) without error, and then
    ``showmigrations`` must show every migration applied, the squashed ones included."""
    proc = _manage(["migrate", "--noinput"], database_url, var_dir)
    if proc.returncode:
        return [f"{label}: migrate then failed: {proc.stderr[-2000:]}"]
    problems = []
    if whole and "No migrations to apply" not in proc.stdout:
        problems.append(f"{label}: migrate then applied something: {proc.stdout[-2000:]}")
    shown = _manage(["showmigrations", *SQUASHED_APPS], database_url, var_dir).stdout
    if "[ ]" in shown or shown.count("[X] 0001_squashed_") != len(SQUASHED_APPS):
        problems.append(f"{label}: showmigrations after migrate:\n{shown}")
    return problems


def check(postgres_url: str | None = None) -> tuple[Schema, list[str], list[str]]:
    """Three empty databases: one migrated by the old chain, one by the squashed chain, one by the
    old chain up to PARTWAY; the first and the last then migrate on with the tree as it is, the
    second migrates back to before the squashed migrations (``migrate runs zero``) and on again.
    Returns the squashed chain's schema, the schema differences and the upgrade problems."""
    with fresh_databases(postgres_url, 3) as (urls, tmp):
        old = dump_in_child("old", urls[0], tmp)
        new = dump_in_child("squashed", urls[1], tmp)
        problems = migrate_on(urls[0], tmp, "the whole old chain", whole=True)
        for args in (["migrate", "runs", "zero", "--noinput"], ["migrate", "--noinput"]):
            proc = _manage(args, urls[1], tmp)  # the squashed chain backwards, and forwards again
            if proc.returncode:
                problems.append(f"the squashed chain: {' '.join(args)} failed: {proc.stderr[-2000:]}")
        label = "the old chain up to " + ", ".join(PARTWAY)
        command = [sys.executable, str(Path(__file__).resolve()), "old", "--to", *PARTWAY]
        proc = subprocess.run(command, cwd=ROOT, env=_child_env(urls[2], tmp), capture_output=True, text=True)
        if proc.returncode:
            problems.append(f"{label}: migrating failed: {proc.stderr[-2000:]}")
        else:
            problems += migrate_on(urls[2], tmp, label, whole=False)
    return new, differences(old, new), problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="migrate DATABASE_URL's empty database, print its schema (JSON)")
    d.add_argument("--chain", choices=["old", "squashed"], required=True)
    o = sub.add_parser("old", help="migrate DATABASE_URL's database by the old chain")
    o.add_argument("--to", nargs="*", default=[], metavar="APP:MIGRATION", help="default: every leaf")
    c = sub.add_parser("check", help="both chains on fresh databases; old databases migrate on")
    c.add_argument("--sqlite", action="store_true")
    c.add_argument("--postgres", metavar="URL")
    args = parser.parse_args(argv)
    if args.command == "dump":
        print(json.dumps(dump(args.chain), sort_keys=True))
        return 0
    if args.command == "old":
        _setup()
        migrate("old", [tuple(t.split(":", 1)) for t in args.to])  # type: ignore[misc]
        return 0
    databases: list[tuple[str, str | None]] = []
    if args.sqlite or not args.postgres:
        databases.append(("SQLite", None))
    pg_url = args.postgres or (None if args.sqlite else os.environ.get("PG_URL"))
    if pg_url:
        databases.append(("PostgreSQL", pg_url))
    status = 0
    for label, url in databases:
        new, lines, problems = check(url)
        counts = ", ".join(f"{len(v)} {k}" for k, v in sorted(new.items()))
        print(f"{label}: {'the same schema' if not lines else f'{len(lines)} differences'} ({counts})")
        for line in lines:
            print("  " + line)
        print(f"{label}: {'old databases migrate on' if not problems else 'upgrade problems'}")
        for line in problems:
            print("  " + line)
        status = status or (1 if lines or problems else 0)
    return status


if __name__ == "__main__":
    sys.exit(main())
