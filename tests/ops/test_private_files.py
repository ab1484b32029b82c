"""var/db.sqlite3 and its -wal and -shm files are 0600 like the rest of var/ (issue 23 §5): they
hold prompts, answers and sessions."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.env import EnvError, env_egress, private_sqlite_file

ROOT = Path(__file__).resolve().parents[2]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _write_in_wal_mode(db: Path) -> sqlite3.Connection:
    """An open connection that wrote in WAL mode (the -wal and -shm files exist until it closes)."""
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE t (x)")
    con.execute("INSERT INTO t VALUES ('a prompt')")
    con.commit()
    assert Path(f"{db}-wal").exists() and Path(f"{db}-shm").exists()
    return con


def test_the_settings_create_the_database_file_0600_and_sqlite_follows(tmp_path):
    db = tmp_path / "var" / "db.sqlite3"
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{db}",
        "DEBUG": "1",
        "WORKBENCH_VAR_DIR": str(tmp_path / "var"),
    }
    env.pop("REDIS_URL", None)
    old = os.umask(0o022)  # a usual umask: SQLite alone would make 0644 files
    try:
        subprocess.run([sys.executable, "-c", "import workbench.settings"], cwd=ROOT, env=env, check=True)
        assert mode(db) == 0o600
        con = _write_in_wal_mode(db)
    finally:
        os.umask(old)
    assert {p.name: mode(p) for p in db.parent.glob("db.sqlite3*")} == {
        "db.sqlite3": 0o600,
        "db.sqlite3-wal": 0o600,
        "db.sqlite3-shm": 0o600,
    }
    con.close()


def test_files_left_open_by_an_earlier_version_are_tightened(tmp_path):
    db = tmp_path / "db.sqlite3"
    old = os.umask(0o022)
    try:
        con = _write_in_wal_mode(db)
        assert mode(db) == mode(Path(f"{db}-wal")) == 0o644
        private_sqlite_file(str(db))
        assert mode(db) == mode(Path(f"{db}-wal")) == mode(Path(f"{db}-shm")) == 0o600
        con.close()
    finally:
        os.umask(old)


def test_memory_databases_are_left_alone():
    private_sqlite_file(":memory:")  # no file named ":memory:" appears
    assert not Path(":memory:").exists()


# -- the egress setting and its alias ----------------------------------------------------------


def test_the_egress_setting_and_its_alias(monkeypatch):
    monkeypatch.delenv("WORKBENCH_EGRESS_ALLOW", raising=False)
    monkeypatch.delenv("PLAYGROUND_EGRESS_ALLOW", raising=False)
    assert env_egress("WORKBENCH_EGRESS_ALLOW", "PLAYGROUND_EGRESS_ALLOW", []) == []
    monkeypatch.setenv("PLAYGROUND_EGRESS_ALLOW", "127.0.0.1:11434, [::1]:11434")
    assert env_egress("WORKBENCH_EGRESS_ALLOW", "PLAYGROUND_EGRESS_ALLOW", []) == [
        "127.0.0.1:11434",
        "[::1]:11434",
    ]
    monkeypatch.setenv("WORKBENCH_EGRESS_ALLOW", "10.0.0.0/8")
    with pytest.raises(EnvError, match="both set"):
        env_egress("WORKBENCH_EGRESS_ALLOW", "PLAYGROUND_EGRESS_ALLOW", [])
    monkeypatch.delenv("PLAYGROUND_EGRESS_ALLOW")
    assert env_egress("WORKBENCH_EGRESS_ALLOW", "PLAYGROUND_EGRESS_ALLOW", []) == ["10.0.0.0/8"]
    for bad in ("localhost", "127.0.0.1:0", "127.0.0.1:99999", "[::1]x", "10.0.0.0/33"):
        monkeypatch.setenv("WORKBENCH_EGRESS_ALLOW", bad)
        with pytest.raises(EnvError):
            env_egress("WORKBENCH_EGRESS_ALLOW", "PLAYGROUND_EGRESS_ALLOW", [])
