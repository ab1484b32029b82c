"""The go-to dialog's runs (GET /goto/?q=): the current workspace's runs by id or title, nothing else."""

from __future__ import annotations

import pytest

from runs.engine.lifecycle import TITLE_KEY
from tests.pages.conftest import login


@pytest.mark.django_db
def test_runs_by_id_or_title_of_the_current_workspace_only(client, bob, charlie, other_workspace, make_run):
    make_run("run_alpha", metadata={TITLE_KEY: "Quarterly report"})
    make_run("run_beta", metadata={TITLE_KEY: "Cover letter"})
    make_run("run_gamma_foreign", ws=other_workspace, metadata={TITLE_KEY: "Quarterly secrets"})
    login(client, bob)
    found = client.get("/goto/", {"q": "quarterly"}).json()["runs"]
    assert [(r["id"], r["title"], r["url"]) for r in found] == [
        ("run_alpha", "Quarterly report", "/runs/run_alpha/")
    ]
    assert found[0]["status"] == "running" and found[0]["started"]
    assert [r["id"] for r in client.get("/goto/", {"q": "BETA"}).json()["runs"]] == ["run_beta"]
    newest = [r["id"] for r in client.get("/goto/").json()["runs"]]
    assert sorted(newest) == ["run_alpha", "run_beta"]  # an empty query: the newest runs, ours only
    assert client.get("/goto/", {"q": "gamma"}).json() == {"runs": []}
    # the other workspace's member sees theirs, never ours
    login(client, charlie)
    assert [r["id"] for r in client.get("/goto/", {"q": "run_"}).json()["runs"]] == ["run_gamma_foreign"]


@pytest.mark.django_db
def test_a_query_too_long_is_refused_with_a_code(client, bob):
    login(client, bob)
    answer = client.get("/goto/", {"q": "x" * 201})
    assert answer.status_code == 400 and answer.json()["code"] == "INVALID_INPUT"


@pytest.mark.django_db
def test_signed_out_is_sent_to_sign_in(client):
    answer = client.get("/goto/", {"q": "run"})
    assert answer.status_code == 302 and "/accounts/login/" in answer["Location"]
