"""Start-up time of common management commands (wall clock and CPU, median of N runs each).

Each command runs in a fresh process against a migrated SQLite database in a temporary folder,
with bytecode caching on (as on any machine where PYTHONDONTWRITEBYTECODE is unset; the first,
untimed round writes the caches into __pycache__/). With PYTHONDONTWRITEBYTECODE=1 and no caches,
every start compiles the project's sources first (about 0.3 s more here).

Target: the common commands start in well under a second. `manage.py check` deliberately loads
every URL (and so the REST API and all views): it is printed for comparison.

Then `migrate` on an EMPTY database, what a fresh install or a test database pays once: SQLite (a
new file each time) and PostgreSQL (a new database each time, ``BENCH_PG_URL``'s server, dropped
afterwards; skipped when it cannot be reached), median of STARTUP_MIGRATE_RUNS, with the number of
migrations applied. Target (issue 53): no slower than a peer's fresh start (Phoenix: ~1-2 s), at
most ~1.5 s on a quiet machine. Every app applies one squashed migration (the contrib and library
apps' from workbench/vendored_migrations/); on PostgreSQL the server's own DDL time for the ~90
tables and ~250 indexes (about 0.9 s here) comes on top of Python's.

Env: STARTUP_BENCH_RUNS (7), STARTUP_MIGRATE_RUNS (5), BENCH_PG_URL.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

try:
    import psycopg
except ImportError:  # PostgreSQL's figure is skipped
    psycopg = None

ROOT = Path(__file__).resolve().parent.parent
RUNS = int(os.environ.get("STARTUP_BENCH_RUNS", "7"))
MIGRATE_RUNS = int(os.environ.get("STARTUP_MIGRATE_RUNS", "5"))
PG_URL = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/workbench_bench_startup")
COMMANDS = [
    ("help", ["help"]),
    ("showmigrations", ["showmigrations"]),
    ("migrate (nothing to do)", ["migrate", "--noinput"]),
    ("tokens --help", ["tokens", "--help"]),
    ("transcript --help", ["transcript", "--help"]),
    ("db_worker --help", ["db_worker", "--help"]),
    ("check (loads every URL)", ["check"]),
]


def timed(args: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.returncode


def sqlite_env(tmp: Path) -> dict[str, str]:
    """The environment of a manage.py run on its own SQLite database and var folder in ``tmp``."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "REDIS_URL")}
    env.update(
        DATABASE_URL=f"sqlite:///{tmp}/db.sqlite3",
        WORKBENCH_VAR_DIR=str(tmp),
        DJANGO_SETTINGS_MODULE="workbench.settings",
    )
    return env


def _pg_admin(url: str, statement: str) -> bool:
    if psycopg is None:
        return False
    base = url.rsplit("/", 1)[0].replace("postgres://", "postgresql://", 1)
    try:
        with psycopg.connect(base + "/postgres", autocommit=True, connect_timeout=5) as con:
            con.execute(statement)
        return True
    except Exception as exc:  # reported, not hidden
        print(f"  (PostgreSQL unavailable: {exc})")
        return False


def migrate_empty(label: str, fresh: Callable[[], dict[str, str] | None]) -> None:
    """`migrate` on a new, empty database each run: median wall and CPU of MIGRATE_RUNS."""
    samples = []
    for _ in range(MIGRATE_RUNS):
        env = fresh()
        if env is None:
            return
        samples.append(timed(["migrate", "--noinput", "-v", "0"], env))
    failed = [c for _, _, c in samples if c]
    count = subprocess.run(
        [sys.executable, "manage.py", "showmigrations", "--plan"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    ).stdout.count("[X]")
    wall = statistics.median(s[0] for s in samples)
    cpu = statistics.median(s[1] for s in samples)
    note = f"  (exit {failed[0]})" if failed else ""
    print(f"  {label:28s} {wall:6.2f}s {cpu:6.2f}s  {count} migrations applied{note}")
    print(
        f"headline: migrate on an empty {label} database {wall:.1f} s ({cpu:.1f} s CPU, {count} migrations)"
    )


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="wb-startup-"))
    try:
        env = sqlite_env(tmp)
        _, _, code = timed(["migrate", "--noinput", "-v", "0"], env)
        if code:
            print("migrate failed")
            return 1
        print(f"manage.py start-up, median of {RUNS} runs (cached bytecode; target well under 1 s)")
        print(f"  {'command':28s} {'wall':>7s} {'cpu':>7s}")
        for label, args in COMMANDS:
            timed(args, env)  # writes the bytecode caches
            samples = [timed(args, env) for _ in range(RUNS)]
            failed = [c for _, _, c in samples if c]
            wall = statistics.median(s[0] for s in samples)
            cpu = statistics.median(s[1] for s in samples)
            note = f"  (exit {failed[0]})" if failed else ""
            print(f"  {label:28s} {wall:6.2f}s {cpu:6.2f}s{note}")
        load = os.getloadavg()[0]
        print(f"  (load average {load:.1f} on {os.cpu_count()} CPUs while measuring)")
        print(f"migrate on an empty database, median of {MIGRATE_RUNS} (a new database each run)")
        print(f"  {'database':28s} {'wall':>7s} {'cpu':>7s}")
        counter = iter(range(1 << 30))

        def fresh_sqlite() -> dict[str, str]:
            folder = tmp / f"empty-{next(counter)}"
            folder.mkdir()
            return sqlite_env(folder)

        def fresh_pg() -> dict[str, str] | None:
            name = PG_URL.rsplit("/", 1)[1]
            if not (
                _pg_admin(PG_URL, f'DROP DATABASE IF EXISTS "{name}"')
                and _pg_admin(PG_URL, f'CREATE DATABASE "{name}"')
            ):
                return None
            return {**sqlite_env(tmp), "DATABASE_URL": PG_URL}

        migrate_empty("SQLite", fresh_sqlite)
        migrate_empty("PostgreSQL", fresh_pg)
        _pg_admin(PG_URL, f'DROP DATABASE IF EXISTS "{PG_URL.rsplit("/", 1)[1]}"')
        print(f"  (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs while measuring)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
