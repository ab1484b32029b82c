"""The recording examples of the docs and the README's quickstart run as written (so the
documentation cannot rot): docs/engineers/sdk.md's in-process and REST examples, and the script of
the README's five-minute path."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runs.models import Event, Run

ROOT = Path(__file__).resolve().parents[2]
SDK_PAGE = ROOT / "docs" / "engineers" / "sdk.md"
README = ROOT / "README.md"


def _code_after(path: Path, heading: str) -> str:
    section = path.read_text(encoding="utf-8").split(heading, 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.django_db
def test_in_process_example_runs():
    code = _code_after(SDK_PAGE, "## Recording from a host application in the same process")
    exec(compile(code, str(SDK_PAGE), "exec"), {})
    run = Run.objects.get(workspace__slug="demo")
    assert run.pending_gates == 1
    assert list(Event.objects.filter(run=run).values_list("type", flat=True)) == [
        "step_started",
        "model_io",
        "artifact_written",
        "step_completed",
        "human_gate_requested",
    ]


def _demo_token() -> str:
    from accounts.tokens import create_token
    from runs.actions.workspaces import get_or_create_workspace

    issued = create_token(
        workspace=get_or_create_workspace("demo"), name="readme", scopes=["read", "write", "review"]
    )
    return issued.secret


@pytest.mark.django_db(transaction=True)
def test_remote_client_example_runs(live_server, capsys):
    secret = _demo_token()
    code = _code_after(SDK_PAGE, "## Recording from another process (REST client)")
    code = code.replace("http://127.0.0.1:8000", live_server.url).replace("wbt_...", secret)
    exec(compile(code, str(SDK_PAGE), "exec"), {})
    assert "'ok': True" in capsys.readouterr().out
    run = Run.objects.get(workspace__slug="demo")
    assert run.last_seq == 3


@pytest.mark.django_db(transaction=True)
def test_readme_quickstart_script_runs(live_server, capsys, monkeypatch):
    """Step 2 of the README's five minutes: the token from `tokens create`, the environment it
    exports, then quickstart.py as written."""
    monkeypatch.setenv("WORKBENCH_URL", live_server.url)
    monkeypatch.setenv("WORKBENCH_TOKEN", _demo_token())
    text = README.read_text(encoding="utf-8")
    assert "manage.py tokens create --workspace demo" in text
    code = _code_after(README, "**2. Send a trace from a script.**")
    assert code.startswith("# quickstart.py")
    exec(compile(code, str(README), "exec"), {})
    run = Run.objects.get(workspace__slug="demo")
    assert f"recorded {run.run_id}" in capsys.readouterr().out
    assert run.title == "Hello from a script" or run.metadata.get("workbench.title") == "Hello from a script"
    assert list(Event.objects.filter(run=run).order_by("seq").values_list("type", flat=True)) == [
        "step_started",
        "model_io",
        "step_completed",
    ]


def test_readme_stays_short_and_its_links_resolve():
    """A newcomer's page: under 12 KB, every relative link pointing at a file of the repository."""
    text = README.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) < 12 * 1024
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert links
    for link in links:
        if "://" in link:
            continue
        assert (ROOT / link).exists(), f"README links to {link}, which does not exist"
