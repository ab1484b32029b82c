"""A transcript goes with its run (issue 23 §5): deleting a run removes its live file and its
index.jsonl line; the retention pass removes the transcripts of runs gone some other way."""

from __future__ import annotations

from io import StringIO

import orjson
import pytest
from django.core.management import call_command

from runs import actions
from runs.models import Run, Workspace
from runs.telemetry.transcript_log import sweep_orphans, transcript_dir, transcript_path

pytestmark = pytest.mark.django_db

PROMPT = "my salary is 123456, draft a letter"


def _index() -> list[dict]:
    path = transcript_dir() / "index.jsonl"
    return [orjson.loads(raw) for raw in path.read_bytes().splitlines()] if path.exists() else []


def _start(workspace, workflow, capture, run_id):
    with capture(execute=True):
        return actions.do_start_run(
            workspace=workspace,
            workflow=workflow,
            actor="user:alice",
            run_id=run_id,
            metadata={"prompt": PROMPT},
        )


def test_deleting_a_run_deletes_its_transcript_and_index_line(
    workspace, workflow, django_capture_on_commit_callbacks
):
    kept = _start(workspace, workflow, django_capture_on_commit_callbacks, "run_kept")
    doomed = _start(workspace, workflow, django_capture_on_commit_callbacks, "run_doomed")
    path = transcript_path(doomed)
    assert path.exists() and PROMPT in path.read_text()
    assert {e["run_id"] for e in _index()} == {"run_kept", "run_doomed"}

    with django_capture_on_commit_callbacks(execute=True):
        actions.do_delete_run(workspace=workspace, run_id="run_doomed")

    assert not path.exists()
    assert [e["run_id"] for e in _index()] == ["run_kept"]
    assert transcript_path(kept).exists()
    assert not any("run_doomed" in p.name for p in transcript_dir().iterdir())


def test_nothing_is_deleted_when_nobody_deleted(workspace, workflow, django_capture_on_commit_callbacks):
    run = _start(workspace, workflow, django_capture_on_commit_callbacks, "run_stays")
    assert sweep_orphans() == 0
    assert transcript_path(run).exists() and [e["run_id"] for e in _index()] == ["run_stays"]


def test_a_run_id_used_again_after_deletion_gets_a_fresh_transcript(
    workspace, workflow, django_capture_on_commit_callbacks
):
    first = _start(workspace, workflow, django_capture_on_commit_callbacks, "run_again")
    old = transcript_path(first)
    with django_capture_on_commit_callbacks(execute=True):
        actions.do_delete_run(workspace=workspace, run_id="run_again")
    second = _start(workspace, workflow, django_capture_on_commit_callbacks, "run_again")
    assert not old.exists() and transcript_path(second).exists()
    assert len(_index()) == 1


def test_the_retention_pass_removes_transcripts_of_runs_gone_another_way(
    workspace, other_workspace, workflow, django_capture_on_commit_callbacks
):
    mine = _start(workspace, workflow, django_capture_on_commit_callbacks, "run_mine")
    theirs = _start(other_workspace, workflow, django_capture_on_commit_callbacks, "run_theirs")
    gone = transcript_path(theirs)
    Workspace.objects.filter(pk=other_workspace.pk).delete()  # cascades: no RunChange for its runs
    assert gone.exists() and not Run.unscoped.filter(run_id="run_theirs").exists()

    out = StringIO()
    call_command("prune_replay_data", stdout=out)

    assert "1 transcript file(s) of deleted runs removed" in out.getvalue()
    assert not gone.exists() and transcript_path(mine).exists()
    assert [e["run_id"] for e in _index()] == ["run_mine"]
