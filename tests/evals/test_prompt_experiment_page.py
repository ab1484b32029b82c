"""The page that starts an experiment of a prompt version (linked from the prompt page): a reviewer
picks a dataset and a baseline and starts it; a viewer sees the page but cannot start one; another
workspace's prompt or dataset is not found; nothing moves a label. Starting one spends like a fork:
owners only (Action.RUN_EXPERIMENT), testers and viewers see the page."""

from __future__ import annotations

import pytest
from django.test import Client

from evals.models import Experiment
from runs.actions.permissions import ROLE_SCOPES
from runs.actions.prompts import do_save_prompt_version
from runs.selectors.prompts import get_prompt, labels_of

URL = "/evals/experiments/new/"


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def two_versions(workspace, bob):
    for text in ("Reply to: {{ticket}}", "Kindly: {{ticket}}"):
        do_save_prompt_version(
            workspace, name="support/draft", body=text, scopes=ROLE_SCOPES["reviewer"], user=bob
        )


@pytest.mark.django_db
def test_an_owner_starts_an_experiment_of_a_version(
    alice, bob, vera, charlie, workspace, two_versions, gate_dataset, django_capture_on_commit_callbacks
):
    tester = _client(alice)
    detail = tester.get("/prompts/support/draft/").content.decode()
    assert f'href="{URL}?prompt=support/draft%402"' in detail
    page = tester.get(URL, {"prompt": "support/draft@2"})
    assert page.status_code == 200 and gate_dataset.public_id in page.content.decode()
    with django_capture_on_commit_callbacks(execute=False):
        started = tester.post(URL, {"prompt": "support/draft@2", "dataset": gate_dataset.public_id})
    experiment = Experiment.objects.get()
    assert started.status_code == 302 and started["Location"] == f"/evals/experiments/{experiment.public_id}/"
    assert experiment.change == {"prompt": {"name": "support/draft", "version": 2}}
    assert experiment.name == "support/draft version 2" and experiment.created_by == "user:alice"
    assert labels_of(get_prompt(workspace, "support/draft")) == {"latest": 2}  # nothing moved

    viewer = _client(vera)
    assert viewer.get(URL, {"prompt": "support/draft@2"}).status_code == 200
    assert (
        viewer.post(URL, {"prompt": "support/draft@2", "dataset": gate_dataset.public_id}).status_code == 403
    )
    refused = tester.post(URL, {"prompt": "support/draft@2", "dataset": "ds_nope"})
    assert refused.status_code == 400 and "Choose a dataset of this workspace." in refused.content.decode()
    for bad in ("support/draft@9", "support/draft", "nope@1", "a\x00@1", ""):
        assert tester.get(URL, {"prompt": bad}).status_code == 404
    outsider = _client(charlie)
    assert outsider.get(URL, {"prompt": "support/draft@2"}).status_code == 404
    assert Experiment.objects.count() == 1


@pytest.mark.django_db
def test_a_dataset_the_prompt_cannot_run_on_is_refused(
    alice, workspace, two_versions, gate_dataset, pipeline
):
    """Items recorded from a workflow without step code here would all fail NOT_EXECUTABLE: the form
    says so with words and creates nothing."""
    from runs.engine import programs
    from tests.evals.pipeline import WORKFLOW

    programs.unregister(WORKFLOW["id"])
    try:
        refused = _client(alice).post(URL, {"prompt": "support/draft@2", "dataset": gate_dataset.public_id})
    finally:
        programs.register(WORKFLOW["id"], pipeline)
    html = refused.content.decode()
    assert refused.status_code == 400 and Experiment.objects.count() == 0
    assert "The prompt cannot run on dataset draft gate: none of its 3 items can" in html
    assert f"workflow {WORKFLOW['id']} has no step code in this workbench" in html
    assert '<code class="error-code">NOT_EXECUTABLE</code>' in html
