"""The wheel serves: built from the checkout, installed into a fresh virtualenv with its declared
dependencies (offline, from a wheelhouse of this virtualenv's, tests/wheelhouse.py), then run the
way a user runs it, from a folder outside the repository: `workbench migrate`, `createworkspace`,
`createuser`, `serve --no-worker`; the run list (signed in), a static file and /docs/ (when the
project has that route) answer 200 from the installed package, whose data lands in ./var."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import httpx
import pytest
from django.urls import Resolver404, resolve

from tests.wheelhouse import build as build_wheelhouse

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _run(command: list[str], *, cwd: Path, env: dict[str, str], stdin: str = "", timeout: float = 600):
    proc = subprocess.run(
        command, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"{command} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def _requires(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode()
    return [m for m in re.findall(r"^Requires-Dist: (.+)$", text, re.M) if "extra ==" not in m]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(port: int, proc: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, "workbench serve exited early"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"nothing listens on {port} after {seconds} s")


def _has_docs_route() -> bool:
    try:
        resolve("/docs/")
    except Resolver404:
        return False
    return True


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh virtualenv with the wheel built from this checkout and its dependencies."""
    base = tmp_path_factory.mktemp("wheel")
    dist = base / "dist"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PIP_"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(ROOT),
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
        ],
        cwd=base,
        env=env,
    )
    (wheel,) = dist.glob("workbench-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for expected in (
        "evals/migrations/0001_",
        "review/migrations/0001_",
        "accounts/management/commands/createuser.py",
        "workbench/templates/base.html",
        "workbench/static/workbench/critical.css",
        "runs/protocol/schemas/rules.basic.json",
    ):
        assert any(n.startswith(expected) for n in names), expected
    assert not any(n.startswith(("tests/", "bench/", "scripts/")) for n in names)
    wheelhouse = base / "wheelhouse"
    build_wheelhouse(_requires(wheel), wheelhouse)
    venv = base / "venv"
    _run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)], cwd=base, env=env)
    _run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q"]
        + ["--no-index", "--find-links", str(wheelhouse), str(wheel)],
        cwd=base,
        env=env,
    )
    return venv


def test_the_installed_wheel_serves_pages_static_files_and_docs(installed, tmp_path):
    home = tmp_path / "home"  # outside the repository: the data goes to ./var here
    home.mkdir()
    env = {"PATH": f"{installed / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    workbench = str(installed / "bin" / "workbench")
    where = _run(
        [str(installed / "bin" / "python"), "-c", "import workbench; print(workbench.__file__)"],
        cwd=home,
        env=env,
    )
    assert where.stdout.strip().startswith(str(installed)), where.stdout

    _run([workbench, "migrate", "--noinput", "-v", "0"], cwd=home, env=env)
    assert (home / "var" / "db.sqlite3").is_file()
    _run([workbench, "createworkspace", "acme", "--name", "Acme"], cwd=home, env=env)
    again = subprocess.run(
        [workbench, "createworkspace", "acme"], cwd=home, env=env, capture_output=True, text=True
    )
    assert again.returncode == 1 and "WORKSPACE_EXISTS" in again.stderr
    _run(
        [
            workbench,
            "createuser",
            "ada",
            "--workspace",
            "acme",
            "--email",
            "ada@example.com",
            "--password-from-stdin",
        ],
        cwd=home,
        env=env,
        stdin="ada-password-123\n",
    )

    port = _free_port()
    serve = subprocess.Popen(
        [workbench, "serve", "--port", str(port), "--no-worker"],
        cwd=home,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        _wait_for(port, serve)
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=30) as client:
            assert client.get("/static/workbench/critical.css").status_code == 200
            login = client.get("/accounts/login/")
            assert login.status_code == 200
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
            signed_in = client.post(
                "/accounts/login/",
                data={"username": "ada", "password": "ada-password-123", "csrfmiddlewaretoken": token},
                headers={"Referer": f"{base}/accounts/login/"},
            )
            assert signed_in.status_code == 302, signed_in.text[:500]
            runs = client.get("/runs/")
            assert runs.status_code == 200 and "Acme" in runs.text
            if _has_docs_route():  # the docs site (served at /docs/) where this checkout has it
                assert client.get("/docs/", follow_redirects=True).status_code == 200
    finally:
        serve.send_signal(signal.SIGTERM)
        out, _ = serve.communicate(timeout=60)
    assert serve.returncode == 0, out
    assert "serving http://127.0.0.1:" in out
