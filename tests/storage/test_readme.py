"""The README's in-process example runs as written (so the documentation cannot rot)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runs.models import Event, Run

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.django_db
def test_in_process_example_runs():
    text = README.read_text()
    section = text.split("## Recording from a host application in the same process", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})
    run = Run.objects.get(workspace__slug="demo")
    assert run.pending_gates == 1
    assert list(Event.objects.filter(run=run).values_list("type", flat=True)) == [
        "step_started",
        "model_io",
        "artifact_written",
        "step_completed",
        "human_gate_requested",
    ]


@pytest.mark.django_db(transaction=True)
def test_remote_client_example_runs(live_server, capsys):
    from accounts.tokens import create_token
    from runs.actions.workspaces import get_or_create_workspace

    issued = create_token(
        workspace=get_or_create_workspace("demo"), name="readme", scopes=["read", "write", "review"]
    )
    section = README.read_text().split("## Recording from another process (REST client)", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    code = code.replace("http://127.0.0.1:8000", live_server.url).replace("wbt_...", issued.secret)
    exec(compile(code, "README.md", "exec"), {})
    assert "'ok': True" in capsys.readouterr().out
    run = Run.objects.get(workspace__slug="demo")
    assert run.last_seq == 3
