"""Real ASGI servers (daphne) on loopback sharing one database and, optionally, Redis.

Used by the two-process test, the browser test and bench/bench_live.py:

    with Cluster(database="postgres", redis_db=10, servers=2) as cluster:
        seed = cluster.seed()              # alice, workspace, API token, a run (JSON from a subprocess)
        cluster.http(0, "POST", f"/api/runs/{run}/annotations", token=..., json={...})

PostgreSQL gets a dedicated database (dropped afterwards); SQLite a file in a temp dir. Each
server is a separate process started here and stopped by its pid.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"
# The servers: the system ones by default; scripts/services.py sets these to the ones it uses.
PG_ADMIN = os.environ.get("LIVE_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
PG_SERVER = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgres://", 1)
REDIS_BASE = os.environ.get("LIVE_REDIS_BASE", "redis://127.0.0.1:6379")
ORIGIN = "http://127.0.0.1"

SEED_SCRIPT = r"""
import json, sys
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.auth import SESSION_KEY, BACKEND_SESSION_KEY, HASH_SESSION_KEY
from accounts.tokens import create_token
from runs import actions
from runs.actions.workspaces import get_or_create_workspace, add_member

spec = json.loads(sys.argv[-1])
ws = get_or_create_workspace("acme", name="Acme")
users = {}
for name, role in spec["users"]:
    user = get_user_model().objects.create_user(username=name, password=name + "-password-123", is_staff=True)
    add_member(ws, user, role)
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session["workbench_workspace"] = ws.slug
    session.save()
    users[name] = session.session_key
issued = create_token(workspace=ws, name="live", scopes=["read", "write", "review"], rate_limit=10_000_000)
run = actions.do_start_run(workspace=ws, workflow=spec["workflow"], actor="user:seed", run_id=spec["run_id"])
print("SEED " + json.dumps({"sessions": users, "token": issued.secret, "run_id": run.run_id, "workspace_id": ws.pk}))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(
        self,
        *,
        database: str = "postgres",
        redis_db: int | None = None,
        servers: int = 1,
        workers: int = 0,
        extra_env: dict[str, str] | None = None,
        launcher: Path | None = None,
    ) -> None:
        self.database = database
        self.redis_db = redis_db
        self.n_servers = servers
        self.n_workers = workers
        self.workers: list[subprocess.Popen] = []  # `manage.py worker` processes
        self.extra_env = extra_env or {}
        self.launcher = launcher  # a script taking PORT CONTROL_DIR instead of the daphne CLI
        self.tmp = Path(tempfile.mkdtemp(prefix="wb-live-"))
        self.db_name = f"workbench_live_test_{uuid.uuid4().hex[:8]}"
        self.procs: list[subprocess.Popen] = []
        self.ports: list[int] = []
        self.logs: list[Path] = []
        self.handles: list = []

    # -- environment
    @property
    def database_url(self) -> str:
        if self.database == "postgres":
            return f"{PG_SERVER}/{self.db_name}?conn_max_age=60"  # as docs/deployment.md says
        return f"sqlite:///{self.tmp / 'db.sqlite3'}"

    @property
    def redis_url(self) -> str | None:
        return None if self.redis_db is None else f"{REDIS_BASE}/{self.redis_db}"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        env.update(
            DJANGO_SETTINGS_MODULE="workbench.settings",
            DATABASE_URL=self.database_url,
            WORKBENCH_VAR_DIR=str(self.tmp),
            SECRET_KEY="live-cluster-" + self.db_name,
            DEBUG="1",
            PYTHONPATH=str(ROOT),
            WORKBENCH_TASKS_BACKEND="database",  # the suite's settings say dummy; a cluster runs tasks
            # the OTLP worker on the first OTLP request (as before its start-up default): a server
            # that takes no span starts no process (tests/telemetry/test_otlp_worker_start.py)
            WORKBENCH_OTLP_WORKER_AT_START="0",
        )
        if self.redis_url:
            env["REDIS_URL"] = self.redis_url
        env.update(self.extra_env)
        return env

    # -- lifecycle
    def __enter__(self) -> Cluster:
        try:
            self.create_database()
            self.manage("migrate", "--noinput", "-v", "0")
            for i in range(self.n_servers):
                self.start_server(i)
            for _ in range(self.n_workers):
                self.start_worker()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def create_database(self) -> None:
        if self.database != "postgres":
            return
        import psycopg

        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.db_name}"')
        if self.redis_url:
            import redis

            redis.Redis.from_url(self.redis_url).flushdb()

    def drop_database(self) -> None:
        if self.database != "postgres":
            return
        import psycopg

        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')

    def manage(self, *args: str, timeout: float = 180) -> str:
        result = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), *args],
            cwd=ROOT,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if result.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result.stdout

    def start_server(self, index: int, port: int | None = None) -> int:
        port = port or free_port()
        log = self.tmp / f"daphne-{index}.log"
        handle = log.open("ab")
        self.handles.append(handle)
        if self.launcher is not None:
            command = [sys.executable, str(self.launcher), str(port), str(self.control_dir(index))]
        else:
            command = [
                str(VENV_BIN / "daphne"),
                "-b",
                "127.0.0.1",
                "-p",
                str(port),
                "workbench.asgi:application",
            ]
        proc = subprocess.Popen(
            command,
            cwd=ROOT,
            env=self.env(),
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
        if index < len(self.procs):
            self.procs[index] = proc
        else:
            self.procs.append(proc)
            self.ports.append(port)
            self.logs.append(log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"daphne exited: {log.read_text()}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=2).status_code < 500:
                    return port
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"daphne did not start: {log.read_text()}")

    def stop_server(self, index: int) -> None:
        proc = self.procs[index]
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)

    def start_worker(self, *args: str) -> subprocess.Popen:
        """Start one `manage.py worker` process (its log beside the servers')."""
        log = self.tmp / f"worker-{len(self.workers)}.log"
        handle = log.open("ab")
        self.handles.append(handle)
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "worker", *args],
            cwd=ROOT,
            env=self.env(),
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
        self.workers.append(proc)
        self.logs.append(log)
        return proc

    def restart_server(self, index: int) -> None:
        """Stop server `index` and start it again on the same port (clients see their socket drop)."""
        self.stop_server(index)
        self.start_server(index, self.ports[index])

    def python(self, code: str, timeout: float = 60) -> str:
        """Run Python with this cluster's settings (django.setup() first) in a process of its own."""
        result = subprocess.run(
            [sys.executable, "-c", "import django; django.setup()\n" + code],
            cwd=ROOT,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if result.returncode != 0:
            raise RuntimeError(f"python failed:\n{result.stdout}\n{result.stderr}")
        return result.stdout

    def control_dir(self, index: int) -> Path:
        return self.tmp / f"control-{index}"

    def close(self) -> None:
        self.procs.extend(self.workers)
        self.workers.clear()
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        self.procs.clear()
        for handle in self.handles:
            handle.close()
        self.handles.clear()
        try:
            self.drop_database()
        finally:
            if self.redis_url:
                try:
                    import redis

                    redis.Redis.from_url(self.redis_url).flushdb()
                except Exception:
                    pass
            keep = os.environ.get("CLUSTER_KEEP_LOGS")  # a directory: the servers' logs are copied there
            if keep:
                os.makedirs(keep, exist_ok=True)
                for log in self.logs:
                    if log.exists():
                        shutil.copy(log, Path(keep) / f"{self.tmp.name}-{log.name}")
            shutil.rmtree(self.tmp, ignore_errors=True)

    # -- data and requests
    def seed(self, *, workflow: dict, run_id: str = "run_live", users=(("alice", "owner"),)) -> dict:
        spec = json.dumps({"workflow": workflow, "run_id": run_id, "users": [list(u) for u in users]})
        out = self._seed(spec)
        line = next(line for line in out.splitlines() if line.startswith("SEED "))
        return json.loads(line[5:])

    def _seed(self, spec: str) -> str:
        code = "import django; django.setup()\n" + SEED_SCRIPT
        result = subprocess.run(
            [sys.executable, "-c", code, spec],
            cwd=ROOT,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if result.returncode != 0:
            raise RuntimeError(f"seed failed:\n{result.stdout}\n{result.stderr}")
        return result.stdout

    def url(self, index: int, path: str) -> str:
        return f"http://127.0.0.1:{self.ports[index]}{path}"

    def ws_url(self, index: int, path: str) -> str:
        return f"ws://127.0.0.1:{self.ports[index]}{path}"
