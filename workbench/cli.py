"""The `workbench` command (the wheel's console script; `python -m workbench` too).

One thin layer over Django's management commands, so that an installed wheel is run the way
Python servers are (`pip install`, then one command):

    workbench migrate                         create or upgrade the database
    workbench createworkspace acme            a workspace
    workbench createuser ada --workspace acme --password-from-stdin   its owner
    workbench serve [--host H] [--port P] [--database-url URL] [--redis-url URL] [--no-worker]
    workbench worker [--threads N] [--queues a,b]
    workbench otlp-storer                     the scaled profile's OTLP storer (WORKBENCH_OTLP_BUFFER=redis)
    workbench tokens create --workspace acme --name ci --scope write
    workbench demo                            demo workspace, users and runs
    workbench verify BUNDLE                   check a bundle's integrity (no Django, no database)
    workbench manage COMMAND ...              any other management command

Data lives under WORKBENCH_HOME (default: the current directory for an installed wheel, the
checkout for a source tree): ./var/db.sqlite3, ./var/secret_key, signing keys, spools.
`serve` runs daphne (ASGI: pages, REST, websockets, MCP, OTLP) and one task worker, and stops both
on Ctrl-C or SIGTERM. This module imports no Django at the top: `verify` and `--help` start fast.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
STOP_GRACE_SECONDS = 20.0

# Subcommand -> the Django management command it runs (arguments are passed on as they are).
PASSTHROUGH = {
    "migrate": "migrate",
    "createworkspace": "createworkspace",
    "createuser": "createuser",
    "tokens": "tokens",
    "demo": "demo_data",
    "worker": "worker",
    "otlp-storer": "otlp_storer",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="workbench",
        description="Workbench: a self-hosted control plane for LLM work.",
        epilog="Data lives under $WORKBENCH_HOME (default: the current directory), in var/.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = sub.add_parser("serve", help="serve pages, REST, websockets, MCP and OTLP, with one worker")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    serve.add_argument("--database-url", help="sqlite:///path or postgres://... (default: ./var/db.sqlite3)")
    serve.add_argument("--redis-url", help="redis://... for the channel layer (scaled profile)")
    serve.add_argument("--no-worker", action="store_true", help="start no task worker process")
    serve.add_argument("--debug", action="store_true", help="DEBUG on (local development only)")
    helps = {
        "migrate": "create or upgrade the database (Django's migrate)",
        "createworkspace": "create a workspace: createworkspace SLUG [--name NAME]",
        "createuser": "create a user owning a workspace: createuser NAME --workspace SLUG",
        "tokens": "create, list or revoke API tokens (tokens create|list|revoke ...)",
        "demo": "load the demo workspace, users and runs",
        "worker": "run a task worker (imports, experiments, deliveries ...)",
        "otlp-storer": "store OTLP batches from the Redis Stream (scaled profile)",
    }
    helps["verify"] = "verify a bundle's integrity (workbench-verify; no database)"
    helps["manage"] = "any Django management command (workbench manage help lists them)"
    for name, text in helps.items():  # listed for --help; main() hands them on before parsing
        sub.add_parser(name, help=text, add_help=False)
    return parser


def _env_for(options: argparse.Namespace) -> dict[str, str]:
    """The environment `serve` gives its processes: flags override the environment."""
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
    if options.database_url:
        env["DATABASE_URL"] = options.database_url
    if options.redis_url:
        env["REDIS_URL"] = options.redis_url
    if options.debug:
        env["DEBUG"] = "1"
    if options.host in LOOPBACK:
        # Plain HTTP on this machine only: no redirect to HTTPS, cookies sent over http://.
        for name in ("SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE"):
            env.setdefault(name, "0")
        env.setdefault("SECURE_HSTS_SECONDS", "0")
    allowed = env.get("ALLOWED_HOSTS")
    if allowed is None:
        host = f"[{options.host}]" if ":" in options.host else options.host
        env["ALLOWED_HOSTS"] = ",".join(dict.fromkeys(["127.0.0.1", "localhost", "[::1]", host]))
    return env


def _setup_django(argv0: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
    # Deferred: importing startup imports Django, which must follow the settings choice above.
    from workbench.startup import configure_for_command

    configure_for_command(["workbench", argv0])
    import django

    django.setup()


def _unapplied_migrations() -> list[str]:
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    try:
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
        return [f"{m.app_label}.{m.name}" for m, _ in plan]
    finally:
        connection.close()


def _has_command(name: str) -> bool:
    from django.core.management import get_commands

    return name in get_commands()


def _say(text: str) -> None:
    print(f"workbench: {text}", file=sys.stderr, flush=True)


def serve(options: argparse.Namespace) -> int:
    """daphne and one worker as child processes; the first to end (or a signal) stops both."""
    env = _env_for(options)
    os.environ.update(env)
    _setup_django("serve")
    from django.conf import settings

    env["WORKBENCH_HOME"] = str(settings.HOME_DIR)  # the children agree on var/ whatever their cwd
    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)  # whitenoise serves from the finders

    pending = _unapplied_migrations()
    if pending:
        _say(f"the database has {len(pending)} unapplied migration(s) (first: {pending[0]}).")
        _say("run `workbench migrate` first (same --database-url / environment), then serve.")
        return 3
    worker = not options.no_worker
    if worker and not _has_command("worker"):
        _say("this version has no `worker` command: serving without a task worker")
        worker = False
    host = f"[{options.host}]" if ":" in options.host and not options.host.startswith("[") else options.host
    shown = "127.0.0.1" if options.host in {"0.0.0.0", "::"} else host
    _say(f"data in {settings.VAR_DIR} (WORKBENCH_HOME={settings.HOME_DIR})")
    _say(
        f"database {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]}: {settings.DATABASES['default']['NAME']}"
    )
    children: list[tuple[str, subprocess.Popen]] = []
    daphne = [sys.executable, "-m", "daphne", "-b", options.host.strip("[]"), "-p", str(options.port)]
    # daphne starts its OTLP worker (embedded profile) as it starts, not on the first OTLP request
    # (the settings' default: WORKBENCH_OTLP_WORKER_AT_START)
    children.append(("daphne", subprocess.Popen([*daphne, "workbench.asgi:application"], env=env)))
    if worker:
        children.append(("worker", subprocess.Popen([sys.executable, "-m", "workbench", "worker"], env=env)))
    _say(f"serving http://{shown}:{options.port}/ ({' + '.join(n for n, _ in children)}; Ctrl-C stops)")
    return _supervise(children)


def _supervise(children: list[tuple[str, subprocess.Popen]]) -> int:
    stop = {"signal": 0}

    def on_signal(signum: int, _frame: object) -> None:
        stop["signal"] = signum

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    code = 0
    try:
        while not stop["signal"]:
            ended = [(name, proc) for name, proc in children if proc.poll() is not None]
            if ended:
                name, proc = ended[0]
                code = proc.returncode or 1
                _say(f"{name} exited with code {proc.returncode}: stopping the others")
                break
            time.sleep(0.2)
    finally:
        for _, proc in children:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for name, proc in children:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _say(f"{name} did not stop within {STOP_GRACE_SECONDS:.0f} s: killed")
                proc.kill()
                proc.wait()
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 0 if stop["signal"] else code


def manage(argv: Sequence[str]) -> int:
    """A Django management command in this process, as manage.py runs it."""
    # Deferred: the protocol-only fast path runs before Django is imported at all.
    from runs.protocol.verify_cli import fast_path

    fast_path(["workbench", *argv])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
    # Deferred: Django is set up only once the settings module is chosen (the line above).
    from workbench.startup import configure_for_command

    configure_for_command(["workbench", *argv])
    from django.core.management import execute_from_command_line
    from django.db import DatabaseError

    try:
        execute_from_command_line(["workbench", *argv])
    except DatabaseError as error:
        _say(f"database error: {error}")
        if argv and argv[0] != "migrate":
            _say("is the database migrated? `workbench migrate` creates or upgrades it")
        return 1
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    # Everything after a passed-on command's name is that command's own (its --help too).
    if args and args[0] in PASSTHROUGH:
        return manage([PASSTHROUGH[args[0]], *args[1:]])
    if args and args[0] == "verify":
        # Deferred: verify needs neither Django nor settings; importing it here keeps the others fast.
        from runs.protocol.verify_cli import main as verify_main

        return verify_main(args[1:])
    if args and args[0] == "manage":
        return manage(args[1:] or ["help"])
    return serve(_parser().parse_args(args))


if __name__ == "__main__":
    sys.exit(main())
