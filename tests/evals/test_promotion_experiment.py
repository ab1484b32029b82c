"""A prompt promotion waiting in the inbox shows the experiment attached to it: the inbox loads the
experiment's summary (regressions against its baseline, cost change) from the evals pages, which
answer 404 for another workspace's experiment; text that is no experiment id is shown as text."""

from __future__ import annotations

import pytest
from django.test import Client

from evals import actions
from evals.runner import run_experiment
from runs.actions.permissions import ROLE_SCOPES
from runs.actions.prompts import do_move_label, do_protect_label, do_save_prompt_version

OWNER, TESTER = ROLE_SCOPES["owner"], ROLE_SCOPES["reviewer"]


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _ask(workspace, alice, bob, experiment_ref: str) -> None:
    for text in ("one", "two"):
        do_save_prompt_version(workspace, name="p", body=text, scopes=TESTER, user=bob)
    do_move_label(workspace, name="p", label="production", version=1, scopes=TESTER, user=bob)
    do_protect_label(workspace, label="production", protected=True, scopes=OWNER, user=alice)
    move = do_move_label(
        workspace,
        name="p",
        label="production",
        version=2,
        scopes=TESTER,
        user=bob,
        experiment_ref=experiment_ref,
    )
    assert move.request is not None


@pytest.mark.django_db
def test_the_inbox_shows_the_attached_experiments_regressions(alice, bob, charlie, workspace, gate_dataset):
    baseline = run_experiment(
        actions.do_create_experiment(workspace=workspace, dataset=gate_dataset, name="base", change={}).pk
    )
    candidate = run_experiment(
        actions.do_create_experiment(
            workspace=workspace,
            dataset=gate_dataset,
            name="haiku",
            change={"configurable": {"draftModel": "claude-haiku-4-5"}},
            baseline=baseline,
        ).pk
    )
    _ask(workspace, alice, bob, candidate.public_id)
    owner = _client(alice)
    inbox = owner.get("/runs/inbox/").content.decode()
    summary_url = f"/evals/experiments/{candidate.public_id}/summary/"
    assert f'hx-get="{summary_url}?prompt=p%402"' in inbox  # the version asked for
    assert f'href="/evals/experiments/{candidate.public_id}/"' in inbox  # without JS: the compare page
    summary = owner.get(summary_url, {"prompt": "p@2"})
    assert summary.status_code == 200
    text = summary.content.decode()
    assert "haiku" in text and "3 regressions" in text and "Cost change" in text
    assert text.count('<tr><th scope="row">') == 3  # each regressed item: scores and cost change
    assert "did not test the version asked for (its change is no prompt version)" in text
    assert _client(charlie).get(summary_url).status_code == 404  # another workspace: as if missing
    assert (
        owner.get("/evals/experiments/exp_00000000-0000-0000-0000-000000000000/summary/").status_code == 404
    )


@pytest.mark.django_db
def test_text_that_is_no_experiment_id_is_shown_as_text(alice, bob, workspace):
    _ask(workspace, alice, bob, '"><script>x</script>')
    inbox = _client(alice).get("/runs/inbox/").content.decode()
    assert "/summary/" not in inbox and "<script>x</script>" not in inbox
    assert "(not an experiment id)" in inbox


@pytest.mark.django_db
def test_an_experiment_of_the_asked_version_says_so(alice, bob, workspace, gate_dataset):
    name = "support/draft"  # the test pipeline's draft text (tests/evals/pipeline.py)
    do_save_prompt_version(workspace, name=name, body="Reply to: {{ticket}}", scopes=TESTER, user=bob)
    do_save_prompt_version(workspace, name=name, body="Kindly: {{ticket}}", scopes=TESTER, user=bob)
    do_move_label(workspace, name=name, label="production", version=1, scopes=TESTER, user=bob)
    do_protect_label(workspace, label="production", protected=True, scopes=OWNER, user=alice)
    baseline = run_experiment(
        actions.do_create_experiment(workspace=workspace, dataset=gate_dataset, name="base", change={}).pk
    )
    candidate = run_experiment(
        actions.do_create_experiment(
            workspace=workspace,
            dataset=gate_dataset,
            name="kinder",
            change={"prompt": {"name": name, "version": 2}},
            baseline=baseline,
        ).pk
    )
    move = do_move_label(
        workspace,
        name=name,
        label="production",
        version=2,
        scopes=TESTER,
        user=bob,
        experiment_ref=candidate.public_id,
    )
    assert move.request is not None
    owner = _client(alice)
    url = f"/evals/experiments/{candidate.public_id}/summary/"
    assert f'hx-get="{url}?prompt=support%2Fdraft%402"' in owner.get("/runs/inbox/").content.decode()
    text = owner.get(url, {"prompt": f"{name}@2"}).content.decode()
    assert "Change: prompt <strong>support/draft version 2</strong>" in text
    assert "did not test" not in text and "3 regressions" in text
    assert (
        "did not test the version asked for (it tested support/draft version 2)"
        in owner.get(url, {"prompt": f"{name}@3"}).content.decode()
    )
