"""The PostgreSQL side of the benches' caches (bench_scale, bench_bigrun): a built database says
what it holds in its COMMENT, so a worktree or a checkout without var/bench/ still finds it.
Imports nothing of Django: the benches ask before they set Django up."""

from __future__ import annotations

import json
from urllib.parse import urlparse


def admin(url: str):
    """``(database name, an autocommit connection to the server's postgres database)``."""
    import psycopg

    name = urlparse(url).path.lstrip("/")
    return name, psycopg.connect(url.replace(f"/{name}", "/postgres", 1), autocommit=True)


def db_record(url: str) -> dict | None:
    """The database's COMMENT as JSON (written with the cache file), or None."""
    import psycopg

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
