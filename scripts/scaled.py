#!/usr/bin/env python3
"""The scaled profile on one machine, in one command: PostgreSQL, Redis, N daphne processes and
task workers behind one port.

    .venv/bin/python scripts/scaled.py [--host 127.0.0.1] [--port 8000] [--web 2]
                                       [--task-workers 2] [--threads 4] [--otlp-storers 2]
                                       [--no-demo]

What it does, in order:
1. PostgreSQL and Redis through scripts/services.py: the machine's own when they answer, else
   servers it provisions under var/services/ (stopped again on exit). DATABASE_URL and REDIS_URL
   from the environment win (database `workbench` and Redis db 0 otherwise; the database is
   created if missing). Without DATABASE_URL each process takes its PostgreSQL connections from
   a pool (psycopg_pool through Django's OPTIONS["pool"]), sized by WORKBENCH_DB_POOL_MAX (10),
   WORKBENCH_DB_POOL_MIN (2) and WORKBENCH_DB_POOL_TIMEOUT (30 s); WORKBENCH_DB_POOL=off keeps
   persistent connections instead (conn_max_age=60).
2. `manage.py migrate`, then `manage.py demo_data` (unless --no-demo; it prints the admin login).
3. `--web` daphne processes on free loopback ports and `--task-workers` `manage.py worker
   --threads N` processes (every background task: playground calls, replays and forks, imports,
   experiments, deliveries, the periodic sweeps; task rows of django-tasks-db), restarted if
   they die; `--otlp-storers` `manage.py otlp_storer` processes, which store the OTLP batches the
   web processes put in a Redis Stream (WORKBENCH_OTLP_BUFFER=redis, runs/actions/otlp_streams.py).
4. A small TCP proxy on HOST:PORT that hands each connection (HTTP or websocket) to the web process
   with the fewest open connections, skipping one that refuses connections.

Settings are production ones (DEBUG=0) unless the environment says otherwise. On a loopback HOST
plain HTTP is allowed (SECURE_SSL_REDIRECT=0; browsers accept secure-only cookies from
127.0.0.1/localhost); on any other HOST put a TLS-terminating proxy in front and set
SECURE_PROXY_SSL_HEADER (docs/deployment.md). Ctrl-C (or SIGTERM) stops every process it started.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import services  # noqa: E402  (scripts/services.py)

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def say(message: str) -> None:
    print(f"scaled: {message}", flush=True)


class Child:
    """One supervised process; restarted (after a pause) when it exits unexpectedly."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.name, self.argv, self.env, self.log = name, argv, env, log
        self.proc: subprocess.Popen | None = None
        self.restarts = 0
        self.started_at = 0.0

    def start(self) -> None:
        handle = self.log.open("ab")
        self.proc = subprocess.Popen(
            self.argv, cwd=ROOT, env=self.env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
        )
        handle.close()
        self.started_at = time.monotonic()

    def check(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            code = self.proc.returncode
            if time.monotonic() - self.started_at < 2:
                time.sleep(1)  # crashing at start: do not spin
            self.restarts += 1
            say(f"{self.name} exited ({code}), restarting (see {self.log})")
            self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> None:
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


# ------------------------------------------------------------------------------------------------
# the proxy


class Proxy:
    def __init__(self, backends: list[int]) -> None:
        self.backends = backends
        self.open = dict.fromkeys(backends, 0)
        self.turn = itertools.count()

    def order(self) -> list[int]:
        start = next(self.turn) % len(self.backends)
        rotated = self.backends[start:] + self.backends[:start]
        return sorted(rotated, key=lambda port: self.open[port])  # stable: ties keep the rotation

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream = None
        for port in self.order():
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                continue
            upstream = (port, up_reader, up_writer)
            break
        if upstream is None:
            writer.write(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            await writer.drain()
            writer.close()
            return
        port, up_reader, up_writer = upstream
        self.open[port] += 1
        try:
            await asyncio.gather(self.pipe(reader, up_writer), self.pipe(up_reader, writer))
        finally:
            self.open[port] -= 1
            for w in (writer, up_writer):
                w.close()

    @staticmethod
    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            try:
                if writer.can_write_eof():
                    writer.write_eof()
            except (OSError, RuntimeError):
                pass


async def serve(host: str, port: int, proxy: Proxy, children: list[Child], stop: asyncio.Event) -> None:
    server = await asyncio.start_server(proxy.handle, host, port, reuse_address=True)
    async with server:
        while not stop.is_set():
            for child in children:
                child.check()
            try:
                await asyncio.wait_for(stop.wait(), 1.0)
            except TimeoutError:
                pass


# ------------------------------------------------------------------------------------------------


def wait_http(port: int, seconds: float = 60) -> bool:
    import http.client

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/accounts/login/", headers={"Host": "127.0.0.1"})
            if conn.getresponse().status < 500:
                return True
        except OSError:
            pass
        time.sleep(0.3)
    return False


def ensure_database(url: str) -> None:
    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    admin = parsed._replace(scheme="postgresql", path="/postgres", query="").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
            say(f"created database {name}")


POOL_ENV = (("WORKBENCH_DB_POOL_MAX", "pool_max"), ("WORKBENCH_DB_POOL_MIN", "pool_min"),
            ("WORKBENCH_DB_POOL_TIMEOUT", "pool_timeout"))  # fmt: skip


def database_url(pg_url: str, environ: dict[str, str]) -> str:
    """The scaled profile's DATABASE_URL on ``pg_url``: a connection pool per process (the sizes
    from the environment, see the module's docstring), or persistent connections when
    WORKBENCH_DB_POOL is off. workbench.env checks the values (a bad one fails at start)."""
    if environ.get("WORKBENCH_DB_POOL", "on").strip().lower() in ("off", "0", "false", "no"):
        return pg_url + "?conn_max_age=60"
    query = ["pool=on"] + [f"{key}={environ[name].strip()}" for name, key in POOL_ENV if environ.get(name)]
    return pg_url + "?" + "&".join(query)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--web", type=int, default=2, help="daphne processes (default 2)")
    parser.add_argument(
        "--task-workers", type=int, default=2, help="`manage.py worker` processes (default 2)"
    )
    parser.add_argument("--threads", type=int, default=4, help="tasks at once per task worker (default 4)")
    parser.add_argument(
        "--otlp-storers", type=int, default=2, help="`manage.py otlp_storer` processes (default 2)"
    )
    parser.add_argument("--no-demo", action="store_true", help="do not load the demo workspace")
    args = parser.parse_args()
    if args.web < 1 or args.task_workers < 0 or args.threads < 1 or args.otlp_storers < 0:
        parser.error("--web and --threads must be >= 1, --task-workers and --otlp-storers >= 0")

    state = services.up()
    logs = services.VAR / "scaled"
    logs.mkdir(parents=True, exist_ok=True)
    children: list[Child] = []
    try:
        urls = services.environment(state)
        env = dict(os.environ)
        env.setdefault("DATABASE_URL", database_url(urls["PG_URL"], env))
        env.setdefault("REDIS_URL", urls["REDIS_TEST_URL"])
        env.setdefault("DEBUG", "0")
        env.setdefault("WORKBENCH_TASKS_BACKEND", "database")
        if args.otlp_storers:  # /v1/traces answers once a batch is in the Redis Stream
            env.setdefault("WORKBENCH_OTLP_BUFFER", "redis")
        env.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
        if args.host in LOOPBACK:
            env.setdefault("SECURE_SSL_REDIRECT", "0")
        else:
            env.setdefault("ALLOWED_HOSTS", f"127.0.0.1,localhost,{args.host}")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        if not env["DATABASE_URL"].startswith("postgres"):
            raise SystemExit("scaled: DATABASE_URL must be a postgres:// URL")
        ensure_database(env["DATABASE_URL"])
        manage = [sys.executable, str(ROOT / "manage.py")]
        subprocess.run([*manage, "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
        url_host = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
        url = f"http://{url_host}:{args.port}/"
        if not args.no_demo:
            subprocess.run([*manage, "demo_data", "--url", url], cwd=ROOT, env=env, check=True)

        ports = [services.free_port() for _ in range(args.web)]
        daphne = str(Path(sys.executable).with_name("daphne"))
        for i, port in enumerate(ports):
            argv = [daphne, "-b", "127.0.0.1", "-p", str(port), "workbench.asgi:application"]
            children.append(Child(f"web {i + 1} (:{port})", argv, env, logs / f"web-{i + 1}.log"))
        for i in range(args.task_workers):
            argv = [*manage, "worker", "--threads", str(args.threads)]
            children.append(Child(f"task worker {i + 1}", argv, env, logs / f"tasks-{i + 1}.log"))
        for i in range(args.otlp_storers):
            argv = [*manage, "otlp_storer"]
            children.append(Child(f"otlp storer {i + 1}", argv, env, logs / f"otlp-storer-{i + 1}.log"))
        for child in children:
            child.start()
        for port in ports:
            if not wait_http(port):
                raise SystemExit(f"scaled: the web process on port {port} did not start (see {logs})")
        say(
            f"{args.web} web process(es) on {', '.join(map(str, ports))}, "
            f"{args.task_workers} task worker(s), {args.otlp_storers} OTLP storer(s); database {env['DATABASE_URL']}, Redis {env['REDIS_URL']}; logs in {logs}"
        )
        say(f"serving {url} (Ctrl-C stops everything)")

        stop = asyncio.Event()

        async def run() -> None:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await serve(args.host, args.port, Proxy(ports), children, stop)

        asyncio.run(run())
        return 0
    finally:
        for child in children:
            child.stop()
        for child in children:
            child.wait(10)
        services.down(state)
        say("stopped")


if __name__ == "__main__":
    sys.exit(main())
