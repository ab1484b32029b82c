"""The short id the runs list shows opens its run (no 404), and a fork gets a title of its own
("<source title> (replay from #N)") instead of its source's."""

from __future__ import annotations

import re

import pytest

from runs import actions
from runs.actions.forks import do_fork_with_history
from runs.engine import commands as c
from runs.models import Run
from tests.pages.conftest import login

pytestmark = pytest.mark.django_db

WF = {"id": "wf-short", "title": "Support reply", "version": 1, "steps": [{"id": "draft"}], "edges": []}


def _run(workspace, run_id: str) -> Run:
    actions.do_start_run(workspace=workspace, workflow=WF, actor="t", run_id=run_id)
    actions.do_command(workspace=workspace, run_id=run_id, command=c.BeginStep("draft"), actor="t")
    return Run.objects.get(run_id=run_id)


def test_the_short_id_in_the_list_opens_the_run(client, alice, workspace, charlie):
    _run(workspace, "run_3f2a9c1e-77aa-4bb0-9c1e-0123456789ab")
    _run(workspace, "run_3f2b0000-77aa-4bb0-9c1e-0123456789ab")
    login(client, alice)
    listing = client.get("/runs/").content.decode()
    assert re.search(r">3f2a9c1e</span>", listing)
    opened = client.get("/runs/3f2a9c1e/")
    assert opened.status_code == 302
    assert opened["Location"] == "/runs/run_3f2a9c1e-77aa-4bb0-9c1e-0123456789ab/"
    assert client.get(opened["Location"]).status_code == 200
    assert client.get("/runs/3f2a9c1e/ledger/")["Location"].endswith("-0123456789ab/ledger/")
    assert client.get("/runs/3f2/").status_code == 404  # ambiguous and too short: not found
    assert client.get("/runs/3f2a0000/").status_code == 404
    login(client, charlie)  # another workspace's run stays as missing as a missing one
    assert client.get("/runs/3f2a9c1e/").status_code == 404


def test_a_fork_has_a_title_of_its_own(client, alice, workspace):
    source = _run(workspace, "run_src")
    fork = do_fork_with_history(
        workspace=workspace, source_run_id=source.run_id, mode="replay", from_seq=0, actor="user:alice"
    )
    fork.run.refresh_from_db()
    assert source.title == "Support reply"
    assert fork.run.title == "Support reply (replay)"
    branch = do_fork_with_history(
        workspace=workspace,
        source_run_id=source.run_id,
        mode="branch",
        from_seq=1,
        overlay={"configurable": {"tone": "warm"}},
        actor="user:alice",
    )
    branch.run.refresh_from_db()
    assert branch.run.title == "Support reply (branch from #1)"
