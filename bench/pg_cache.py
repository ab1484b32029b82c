"""The PostgreSQL side of the benches' caches (bench_scale, bench_bigrun): a built database says
what it holds in its COMMENT, so a worktree or a checkout without var/bench/ still finds it.
Imports nothing of Django: the benches ask before they set Django up."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from urllib.parse import urlparse

import psycopg


def admin(url: str):
    """``(database name, an autocommit connection to the server's postgres database)``."""
    name = urlparse(url).path.lstrip("/")
    return name, psycopg.connect(url.replace(f"/{name}", "/postgres", 1), autocommit=True)


def db_record(url: str) -> dict | None:
    """The database's COMMENT as JSON (written with the cache file), or None."""
    try:
        name, conn = admin(url)
        with conn:
            row = conn.execute(
                "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s", [name]
            ).fetchone()
    except psycopg.Error:
        return None
    try:
        return json.loads(row[0]) if row and row[0] else None
    except ValueError:
        return None


def pg_tool(name: str) -> str | None:
    """``pg_dump``/``pg_restore``: from WORKBENCH_PG_BIN (a self-provisioned server), else PATH."""
    bindir = os.environ.get("WORKBENCH_PG_BIN")
    return shutil.which(name, path=bindir) if bindir else shutil.which(name)


def dump(url: str, path, log=print) -> bool:
    """The database in pg_dump's custom format at ``path`` (written beside it, then renamed, so a
    broken dump is never taken for a cache); False when pg_dump is not there or fails."""

    tool = pg_tool("pg_dump")
    if tool is None:
        log("  no pg_dump: the build is cached in its database only")
        return False
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    t0 = time.perf_counter()
    done = subprocess.run([tool, "-Fc", "-Z", "1", "-f", str(part), url], check=False)
    if done.returncode != 0:
        part.unlink(missing_ok=True)
        log(f"  pg_dump failed (exit {done.returncode}): the build is cached in its database only")
        return False
    part.rename(path)
    log(f"  dumped to {path} ({path.stat().st_size / 2**30:.1f} GiB) in {time.perf_counter() - t0:.0f} s")
    return True


def restore(url: str, path, jobs: int = 2, log=print) -> bool:
    """A fresh database at ``url`` from a custom-format dump (``pg_restore -j``: data, then the
    indexes built in ``jobs`` processes), then VACUUMed and ANALYZEd (a dump holds no planner
    statistics); False when pg_restore is not there or fails."""
    tool = pg_tool("pg_restore")
    if tool is None:
        return False
    name, conn = admin(url)
    with conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    t0 = time.perf_counter()
    done = subprocess.run(
        [tool, "-j", str(jobs), "--no-owner", "--exit-on-error", "-d", url, str(path)], check=False
    )
    if done.returncode != 0:
        log(f"  pg_restore failed (exit {done.returncode}): building instead")
        return False
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE)")
    log(f"  restored {path} in {time.perf_counter() - t0:.0f} s")
    return True
