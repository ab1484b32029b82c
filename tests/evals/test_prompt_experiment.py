"""An experiment whose change is "prompt X version N": each item's source run is forked from the step
that uses the prompt (the program's ``prompt_steps``), and the fork's step code gets version N's
text and config from ``session.prompt(X)``; its model calls record ``X@N``. A version the workspace
does not have is refused with a code, nothing created."""

from __future__ import annotations

import pytest

from evals import actions
from evals.models import Experiment
from evals.runner import run_experiment
from runs.actions import ActionError
from runs.actions.permissions import ROLE_SCOPES
from runs.actions.prompts import do_move_label, do_save_prompt_version
from runs.execution.host import Workbench
from runs.models import Event
from runs.selectors.prompts import cost_by_version, find_version
from runs.selectors.run_list import RunListFilters, runs_page
from tests.evals.pipeline import WORKFLOW

OWNER = ROLE_SCOPES["owner"]
NAME = "support/draft"


@pytest.fixture
def prompted(workspace, alice, pipeline, fake):
    """Prompt support/draft v1 in production; three runs drafted with it, decided at the gate."""
    do_save_prompt_version(workspace, name=NAME, body="Reply to: {{ticket}}", scopes=OWNER, user=alice)
    do_move_label(workspace, name=NAME, label="production", version=1, scopes=OWNER, user=alice)
    wb = Workbench(workspace=workspace, actor="pipeline")
    for i in range(3):
        run = wb.run_workflow(workflow=WORKFLOW, metadata={"ticket": f"ticket {i}: my order is late"}).run
        assert run.status == "completed"
    dataset = actions.do_create_dataset(workspace=workspace, name="drafts", actor="user:alice")
    added, _ = actions.do_add_items(dataset=dataset, items=actions.items_from_gates(workspace, "draft"))
    assert added == 3
    return dataset


def _ids(workspace, text: str) -> set[str]:
    runs, _ = runs_page(workspace, RunListFilters(prompt=text))
    return {r.run_id for r in runs}


@pytest.mark.django_db
def test_a_prompt_version_is_the_experiments_change(workspace, alice, prompted, fake):
    assert len(_ids(workspace, f"{NAME}@1")) == 3  # the source runs used production (v1)
    do_save_prompt_version(workspace, name=NAME, body="Kindly answer: {{ticket}}", scopes=OWNER, user=alice)
    baseline = run_experiment(
        actions.do_create_experiment(workspace=workspace, dataset=prompted, name="replay", change={}).pk
    )
    asked = len(fake.requests)
    candidate = run_experiment(
        actions.do_create_experiment(
            workspace=workspace,
            dataset=prompted,
            name="draft v2",
            change={"prompt": {"name": NAME, "version": 2}},
            baseline=baseline,
        ).pk
    )
    assert candidate.status == "completed" and candidate.change == {"prompt": {"name": NAME, "version": 2}}
    assert len(fake.requests) == asked + 3  # only the draft re-ran (forked from its step)
    texts = [str(r) for r in fake.requests[asked:]]
    assert all("Kindly answer: ticket" in t for t in texts)
    forks = {row.run_id_text for row in candidate.items.all()}
    assert _ids(workspace, f"{NAME}@2") == forks  # their calls record the version
    assert cost_by_version(workspace, NAME)["rows"][0]["version"] == 2
    assert candidate.summary["baseline"]["regressions"] == 3  # the echoed reply changed
    # The label did not move: production still answers version 1.
    assert find_version(workspace, NAME, label="production").number == 1


@pytest.mark.django_db
def test_the_fork_uses_the_versions_text_not_the_label(workspace, alice, prompted, fake):
    do_save_prompt_version(workspace, name=NAME, body="v2 {{ticket}}", scopes=OWNER, user=alice)
    do_save_prompt_version(workspace, name=NAME, body="v3 {{ticket}}", scopes=OWNER, user=alice)
    do_move_label(workspace, name=NAME, label="production", version=3, scopes=OWNER, user=alice)
    asked = len(fake.requests)
    run_experiment(
        actions.do_create_experiment(
            workspace=workspace, dataset=prompted, name="v2", change={"prompt": {"name": NAME, "version": 2}}
        ).pk
    )
    assert all("v2 ticket" in str(r) for r in fake.requests[asked:])
    drafted = Event.objects.filter(
        type="model_io", body__contains='"workbench.prompt":{"name":"support/draft"'
    )
    assert drafted.filter(body__contains='"version":2').count() == 3


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"prompt": {"name": NAME, "version": 9}}, "change.prompt"),
        ({"prompt": {"name": "nope", "version": 1}}, "change.prompt"),
        ({"prompt": {"name": NAME}}, "change.prompt"),
        ({"prompt": {"name": NAME, "version": "1"}}, "change.prompt.version"),
        ({"prompt": {"name": "a\x00", "version": 1}}, "change.prompt.name"),
        ({"prompt": "support/draft@1"}, "change.prompt"),
        ({"configurable": {"workbench.prompts": {}}}, "change.configurable.workbench.prompts"),
    ],
)
def test_a_bad_prompt_change_is_refused_and_creates_nothing(workspace, prompted, change, path):
    with pytest.raises(ActionError) as caught:
        actions.do_create_experiment(workspace=workspace, dataset=prompted, name="x", change=change)
    assert caught.value.code == "INVALID_INPUT" and caught.value.path == path
    assert not Experiment.objects.exists()


@pytest.mark.django_db
def test_another_workspaces_prompt_is_not_found(workspace, other_workspace, alice, prompted):
    do_save_prompt_version(other_workspace, name="theirs", body="x", scopes=OWNER, user=None)
    with pytest.raises(ActionError) as caught:
        actions.do_create_experiment(
            workspace=workspace,
            dataset=prompted,
            name="x",
            change={"prompt": {"name": "theirs", "version": 1}},
        )
    assert caught.value.path == "change.prompt"
