"""Transcript files made ahead (runs.telemetry.transcript_log.keep_files_ready): the OTLP worker
creates a run per trace, and a new run's file is an empty file it made while idle, linked into
place. Never over a file that exists, never one another process made, never in a process that
did not ask for it."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest

from runs import actions
from runs.telemetry import transcript_log
from runs.telemetry.transcript_log import keep_files_ready, make_ready_files, transcript_dir, transcript_path

pytestmark = pytest.mark.django_db


@pytest.fixture
def ready():
    keep_files_ready(4)
    yield transcript_dir() / ".pool" / str(os.getpid())
    keep_files_ready(0)


def _start(workspace, workflow, capture, run_id):
    with capture(execute=True):
        return actions.do_start_run(workspace=workspace, workflow=workflow, actor="user:alice", run_id=run_id)


def test_a_new_runs_file_is_one_made_ahead(workspace, workflow, ready, django_capture_on_commit_callbacks):
    assert make_ready_files(10) == 4 and make_ready_files(10) == 0  # up to the size asked for
    for folder in (ready, ready.parent):
        assert oct(folder.stat().st_mode & 0o777) == oct(0o700)  # what they become holds prompts
    made = {os.stat(ready / name).st_ino for name in os.listdir(ready)}
    run = _start(workspace, workflow, django_capture_on_commit_callbacks, "run_ready")
    path = transcript_path(run)
    assert path.stat().st_ino in made  # linked, not created
    assert len(os.listdir(ready)) == 3 and path.stat().st_nlink == 1  # the pool's name is gone
    lines = [orjson.loads(raw) for raw in path.read_bytes().splitlines()]
    assert lines[0]["type"] == "run.started" and lines[0]["seq"] == 1
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)
    assert make_ready_files(10) == 1  # made again when idle


def test_a_file_that_exists_is_never_replaced(workspace, workflow, ready, django_capture_on_commit_callbacks):
    make_ready_files(10)
    run = _start(workspace, workflow, django_capture_on_commit_callbacks, "run_kept")
    path = transcript_path(run)
    before = path.read_bytes()
    transcript_log._ready.place(str(path))  # a new run's file that somebody wrote meanwhile
    assert path.read_bytes() == before and len(os.listdir(ready)) == 3


def test_a_process_that_did_not_ask_creates_its_files(
    workspace, workflow, django_capture_on_commit_callbacks
):
    assert make_ready_files(10) == 0
    run = _start(workspace, workflow, django_capture_on_commit_callbacks, "run_plain")
    assert transcript_path(run).is_file() and not (transcript_dir() / ".pool").exists()


def test_files_made_by_a_process_that_is_gone_are_removed_and_a_live_ones_kept(ready):
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    pools = transcript_dir() / ".pool"
    for pid in (gone.stdout.strip(), str(os.getppid())):
        (pools / pid).mkdir(parents=True)
        (pools / pid / "1").touch()
    make_ready_files(1)
    assert sorted(os.listdir(pools)) == sorted([str(os.getpid()), str(os.getppid())])
    assert len(os.listdir(ready)) == 1
