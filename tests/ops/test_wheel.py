"""The wheel serves: built from the checkout, installed into a fresh virtualenv with its declared
dependencies (offline, from a wheelhouse of this virtualenv's, tests/wheelhouse.py), then run the
way a user runs it, from a folder outside the repository: `workbench migrate`, `createworkspace`,
`createuser`, `serve --no-worker`; the run list (signed in), a static file and /docs/ answer 200
from the installed package, whose data lands in ./var. Then `serve` with its task worker: Ctrl-C
(SIGINT to its process group, as a terminal sends it) stops the server, the worker and the
server's OTLP worker, and `serve` exits 0."""

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


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children of all its threads, recursively)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = [int(p) for p in (task / "children").read_text().split()]
        except FileNotFoundError:  # a thread or process that ended meanwhile
            continue
        for child in children:
            found += [child, *_descendants(child)]
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except FileNotFoundError:
        return ""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has exited (its parent has not reaped it yet)


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
            assert client.get("/docs/", follow_redirects=True).status_code == 200  # the docs site
    finally:
        serve.send_signal(signal.SIGTERM)
        out, _ = serve.communicate(timeout=60)
    assert serve.returncode == 0, out
    assert "serving http://127.0.0.1:" in out

    # with its task worker (no --no-worker): Ctrl-C stops server, worker and the OTLP worker, both
    # as a terminal sends it (to the process group) and sent to `serve` alone (it stops the others)
    for group in (True, False):
        _serve_then_interrupt(workbench, home, env, group=group)


def _serve_then_interrupt(workbench: str, home: Path, env: dict[str, str], *, group: bool) -> None:
    port = _free_port()
    serve = subprocess.Popen(
        [workbench, "serve", "--port", str(port)],
        cwd=home,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as a shell's foreground job
    )
    try:
        _wait_for(port, serve)
        deadline = time.monotonic() + 60
        while True:  # daphne, the task worker, and daphne's OTLP worker (embedded profile)
            below = {pid: _cmdline(pid) for pid in _descendants(serve.pid)}
            kinds = {k for k in ("daphne", " worker", "otlp_worker") if any(k in c for c in below.values())}
            if len(kinds) == 3 or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert kinds == {"daphne", " worker", "otlp_worker"}, below
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            assert client.get("/static/workbench/critical.css").status_code == 200
        if group:
            os.killpg(serve.pid, signal.SIGINT)  # Ctrl-C in a terminal
        else:
            serve.send_signal(signal.SIGINT)
        out, _ = serve.communicate(timeout=90)
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
    assert serve.returncode == 0, out
    assert "(daphne + worker; Ctrl-C stops)" in out, out
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in below) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [below[pid] for pid in below if _alive(pid)] == [], (group, out)  # nothing left running
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
