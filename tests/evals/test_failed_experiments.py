"""An experiment whose items fail says why (the stored code with words), and a prompt promotion
whose experiment failed on every item neither reads "completed on N items" nor is approved in one
click: the inbox says what failed and the approval needs an explicit override. Whoever asked for a
promotion is not offered Approve, and a refusal reads as a sentence with its code as a small tag."""

from __future__ import annotations

import pytest
from django.test import Client

from evals import actions
from evals.models import ItemStatus
from evals.runner import run_experiment
from runs.actions import ActionError
from runs.actions.permissions import ROLE_SCOPES
from runs.actions.prompts import (
    do_decide_promotion,
    do_move_label,
    do_protect_label,
    do_save_prompt_version,
)
from runs.engine import programs
from runs.models import PromotionRequest
from runs.selectors import prompts as sel
from tests.evals.pipeline import WORKFLOW

OWNER, TESTER = ROLE_SCOPES["owner"], ROLE_SCOPES["reviewer"]


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def failed_experiment(workspace, gate_dataset, pipeline):
    """An experiment over runs whose workflow has no step code here: every item NOT_EXECUTABLE."""
    programs.unregister(WORKFLOW["id"])
    try:
        experiment = run_experiment(
            actions.do_create_experiment(
                workspace=workspace,
                dataset=gate_dataset,
                name="colder",
                change={"configurable": {"draftModel": "claude-haiku-4-5", "tone": "cold"}},
            ).pk
        )
    finally:
        programs.register(WORKFLOW["id"], pipeline)
    assert {row.status for row in experiment.items.all()} == {ItemStatus.FAILED}
    return experiment


def _ask(workspace, alice, bob, experiment_ref: str) -> PromotionRequest:
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
    return move.request


@pytest.mark.django_db
def test_failed_items_show_their_reason_and_the_change_reads_as_a_table(alice, failed_experiment):
    html = _client(alice).get(f"/evals/experiments/{failed_experiment.public_id}/").content.decode()
    assert html.count('<code class="error-code">NOT_EXECUTABLE</code>') == 3
    assert "The workbench has no step code for this workflow (its host replays it)." in html
    assert "{&#x27;configurable&#x27;" not in html and "{'configurable'" not in html  # no Python dict
    assert '<th scope="row" class="mono">tone</th><td class="mono">cold</td>' in html


@pytest.mark.django_db
def test_the_summary_of_an_experiment_that_failed_everywhere_says_so(alice, failed_experiment):
    text = _client(alice).get(f"/evals/experiments/{failed_experiment.public_id}/summary/").content.decode()
    assert "completed" not in text and "on every item" in text
    assert "failed on all 3 items: the workbench has no step code" in text
    assert '<code class="error-code">' not in text or "NOT_EXECUTABLE" in text


@pytest.mark.django_db
def test_a_promotion_whose_experiment_failed_needs_an_override(alice, bob, workspace, failed_experiment):
    request = _ask(workspace, alice, bob, failed_experiment.public_id)
    owner = _client(alice)
    inbox = owner.get("/runs/inbox/").content.decode()
    assert "Approve despite the failed experiment" in inbox
    assert 'name="override" value="1" required' in inbox
    owner.post(f"/promotions/{request.pk}/decide/", {"decision": "approved"})  # one click: refused
    request.refresh_from_db()
    assert request.status == "pending" and sel.find_version(workspace, "p", label="production").number == 1
    refused = owner.get("/runs/inbox/").content.decode()
    assert (
        '<code class="error-code">EXPERIMENT_FAILED</code>' in refused and "failed on all 3 items" in refused
    )
    with pytest.raises(ActionError) as caught:
        do_decide_promotion(workspace, request_id=request.pk, approve=True, scopes=OWNER, user=alice)
    assert caught.value.code == "EXPERIMENT_FAILED"
    owner.post(f"/promotions/{request.pk}/decide/", {"decision": "approved", "override": "1"})
    request.refresh_from_db()
    assert request.status == "approved" and sel.find_version(workspace, "p", label="production").number == 2


@pytest.mark.django_db
def test_the_requester_is_not_offered_approve_and_a_refusal_reads_as_a_sentence(alice, bob, workspace):
    request = _ask(workspace, alice, bob, "")
    asker = _client(bob)
    html = asker.get("/runs/inbox/").content.decode()
    card = html[html.index(f'id="promotion-{request.pk}"') :]
    card = card[: card.index("</article>")]
    assert 'value="approved"' not in card and 'value="rejected"' in card
    assert "someone else approves it (separation of duties)" in card
    asker.post(f"/promotions/{request.pk}/decide/", {"decision": "approved"})  # forged: refused
    page = asker.get("/runs/inbox/").content.decode()
    assert "SELF_APPROVAL:" not in page
    assert "You asked for this promotion, so someone else has to approve it" in page
    assert '<code class="error-code">SELF_APPROVAL</code>' in page
    other = _client(alice).get("/runs/inbox/").content.decode()
    assert f'action="/promotions/{request.pk}/decide/"' in other and 'value="approved"' in other
