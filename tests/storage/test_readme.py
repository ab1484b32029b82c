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
