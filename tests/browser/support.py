"""Shared by the browser tests: Debian's Chromium through Playwright, and the app served by daphne."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.testdb import copy_migrated_sqlite

# expect() retries its check up to 30 s (Playwright's default is 5 s): make test runs the Chromium
# phase beside the SQLite suite on two cores, where a live update can take longer than 5 s to reach
# the page. A check that holds returns at once, so this only changes how long a failure waits.
expect.set_options(timeout=30_000)

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
# Playwright's own browser download cannot work here; these flags keep Chromium off the network.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def require_chromium() -> None:
    if not os.path.exists(CHROMIUM):
        pytest.skip("chromium is not installed (make chromium)")


def launch(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _leases(database: Path) -> int:
    with sqlite3.connect(database) as db:
        return db.execute("SELECT count(*) FROM runs_workerlease").fetchone()[0]


@contextmanager
def serve_app(
    tmp: Path,
    *,
    setup_code: str,
    extra_env: dict[str, str] | None = None,
    keep_stdout: bool = False,
    workers: int = 1,
) -> Iterator[str]:
    """A fresh SQLite database in `tmp`, migrated and seeded by `setup_code`, served by daphne
    (with `keep_stdout`, its standard output, the console e-mails among it, in tmp/stdout.log),
    and `workers` `manage.py worker` processes (the task backend then is the database's; their
    standard output goes to the same file)."""
    require_chromium()
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
        "SECRET_KEY": "browser-test-secret-key-0123456789abcdef",
        "WORKBENCH_VAR_DIR": str(tmp),
        "DEBUG": "1",
        "DJANGO_SETTINGS_MODULE": "workbench.settings",
        "PYTHONPATH": str(REPO),
        # approvals are sent at once unless a test measures the undo (test_keyboard_review_browser)
        "WORKBENCH_APPROVE_UNDO_MS": "0",
        # no OTLP worker process unless a span comes (tests/telemetry/test_otlp_worker_start.py)
        "WORKBENCH_OTLP_WORKER_AT_START": "0",
        **({"WORKBENCH_TASKS_BACKEND": "database"} if workers else {}),
        **(extra_env or {}),
    }
    env.pop("REDIS_URL", None)
    python = sys.executable
    copy_migrated_sqlite(tmp / "db.sqlite3", env)  # migrated once per run, copied for each server
    subprocess.run([python, "-c", setup_code], cwd=REPO, env=env, check=True)
    port = free_port()
    with open(tmp / "daphne.log", "w") as log, open(tmp / "stdout.log", "w") as out:
        proc = subprocess.Popen(
            [
                str(Path(python).with_name("daphne")),
                "-b",
                "127.0.0.1",
                "-p",
                str(port),
                "workbench.asgi:application",
            ],
            cwd=REPO,
            env={**env, "PYTHONUNBUFFERED": "1"} if keep_stdout else env,
            stdout=out if keep_stdout else subprocess.DEVNULL,
            stderr=log,
        )
        helpers = [
            subprocess.Popen(
                [python, "manage.py", "worker", "--threads", "2"],
                cwd=REPO,
                env={**env, "PYTHONUNBUFFERED": "1"},
                stdout=out if keep_stdout else subprocess.DEVNULL,
                stderr=log,
            )
            for _ in range(workers)
        ]
    try:
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    pytest.fail(f"daphne did not start: {(tmp / 'daphne.log').read_text()[-2000:]}")
                time.sleep(0.2)
        while workers and _leases(tmp / "db.sqlite3") < workers:  # the workers are claiming tasks
            if time.time() > deadline or any(h.poll() is not None for h in helpers):
                pytest.fail(f"the worker did not start: {(tmp / 'daphne.log').read_text()[-2000:]}")
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        for child in (proc, *helpers):
            child.terminate()
        for child in (proc, *helpers):
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()


# WORKBENCH_SCREENSHOTS names another folder for them (test-results/ is gitignored).
SHOTS = Path(os.environ.get("WORKBENCH_SCREENSHOTS") or REPO / "test-results" / "screenshots")
# Error answers a test provokes on purpose (form validation is 422, a missing thing 404); the
# browser logs them as console errors, so a page may name the ones it expects.
EXPECTED_ERROR_STATUSES = ("status of 422",)


def shot(page, name: str) -> None:
    """A full-page screenshot kept as a test artifact (<SHOTS>/<name>.png).

    ``caret="initial"``: to hide the text caret Playwright writes ``caret-color`` into each input's
    inline style; an htmx swap settling at that moment copies that ``style`` attribute and the CSP
    (no inline styles) reports it, an error of the instrument, not of the page."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True, caret="initial")


def new_page(browser, *, ignore: tuple[str, ...] = EXPECTED_ERROR_STATUSES, **context_options):
    """A page in a new browser context whose console errors and uncaught exceptions (CSP
    violations included) collect in ``page.console_errors`` as "<url>: <text>"."""
    page = browser.new_context(**context_options).new_page()
    errors: list[str] = []
    page.on(
        "console",
        lambda msg: (
            errors.append(f"{page.url}: {msg.text}")
            if msg.type == "error" and not any(s in msg.text for s in ignore)
            else None
        ),
    )
    page.on("pageerror", lambda exc: errors.append(f"{page.url}: {exc}"))
    page.console_errors = errors  # type: ignore[attr-defined]
    return page


def sign_in(page, base: str, user: str, password: str | None = None) -> None:
    """Through the sign-in form; waits until the form has let the user in."""
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", user)
    page.fill("#id_password", password or f"{user}-password-123")
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


@contextmanager
def signed_in_page(base: str, user: str, **page_options) -> Iterator:
    """One Chromium with one page signed in as ``user`` (password ``<user>-password-123``)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = new_page(browser, **page_options)
            sign_in(page, base, user)
            yield page
        finally:
            browser.close()
