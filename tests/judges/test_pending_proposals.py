"""A proposal stays the owners' while its gate waits (issue 50: "Whether reviewers see the proposal
is a setting, off until the judge is calibrated (so human labels stay independent)"): the judge's
page, its own call runs (pages, runs list, REST) and the setting itself, which is refused until the
judge is calibrated."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from accounts.principals import principal_for_membership
from evals import selectors as eval_selectors
from evals.models import Dataset
from judges import actions as judge_actions
from judges.actions import NOT_CALIBRATED
from judges.models import GateJudge, Proposal
from runs.actions import ActionError
from runs.live.consumers import authorize_run
from runs.mcp import operations as mcp
from runs.models import Membership
from tests.judges.conftest import calibrate, decide, verdict, waiting_run

pytestmark = pytest.mark.django_db

RATIONALE = "the parse is complete and the totals add up"


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _sources(dataset: Dataset) -> set[str]:
    return {item["source"]["runId"] for item in eval_selectors.items_at(dataset, dataset.revision)}


def _proposals_table(html: str) -> str:
    return html.split('<table id="proposals">', 1)[1].split("</table>", 1)[0]


@pytest.fixture
def pending(workspace, workflow, judge, fake):
    """A run waiting at the judge's gate, with the judge's proposal (approve, 0.83) recorded."""
    run = waiting_run(workspace, workflow, "run_secret")
    fake.script(verdict("approve", 0.83, RATIONALE))
    judge_actions.judge_run(run.pk)
    proposal = Proposal.objects.get(judge=judge, run=run)
    assert (proposal.status, proposal.decision, proposal.outcome) == ("proposed", "approved", "")
    return run, proposal


def test_the_judge_page_keeps_a_pending_proposal_from_reviewers_until_the_gate_is_decided(
    alice, bob, vera, workspace, judge, pending
):
    run, _proposal = pending
    for user in (bob, vera):
        html = _client(user).get(f"/judges/{judge.judge_id}/").content.decode()
        table = _proposals_table(html)
        assert "run_secret" not in table and "badge-approved" not in table and "0.83" not in table
        assert "No proposal yet." in table
        assert "1 proposal on gate still waiting for a decision is shown here once" in html
    owner = _client(alice).get(f"/judges/{judge.judge_id}/").content.decode()
    table = _proposals_table(owner)
    assert "run_secret" in table and "badge-approved" in table and "0.83" in table
    assert 'id="withheld"' not in owner

    decide(workspace, run, "rejected")
    judge_actions.judge_run(run.pk)  # joins the decision with the proposal
    for user in (bob, vera):
        html = _client(user).get(f"/judges/{judge.judge_id}/").content.decode()
        table = _proposals_table(html)
        assert "run_secret" in table and "badge-approved" in table and "0.83" in table
        assert 'id="withheld"' not in html


def test_the_judges_own_call_run_is_the_owners_to_read(alice, bob, vera, workspace, judge, pending):
    _run, proposal = pending
    call = proposal.judge_run_id
    assert call
    for user in (bob, vera):
        client = _client(user)
        assert client.get(f"/runs/{call}/").status_code == 404
        assert client.get(f"/runs/{call}/ledger/").status_code == 404
        assert call not in client.get("/runs/").content.decode()
        assert call not in client.get("/runs/?q=approve").content.decode()  # not by its model answer
        assert client.get(f"/goto/?q={call}").json()["runs"] == []  # nor in the go-to dialog
        for path in (f"/api/runs/{call}", f"/api/runs/{call}/events"):
            response = client.get(path)
            assert response.status_code == 404 and response.json()["code"] == "UNKNOWN_RUN"
        listed = client.get("/api/runs?limit=100").json()
        assert call not in {r["id"] for r in listed} and "run_secret" in {r["id"] for r in listed}
        assert call not in client.get("/api/runs?tag=gate-judge").content.decode()
        assert authorize_run(user, call) is None  # nor its live page's socket
        # MCP: the same rule
        caller = principal_for_membership(Membership.objects.get(user=user, workspace=workspace))
        assert call not in {r["id"] for r in mcp.list_runs(caller)["runs"]}
        with pytest.raises(mcp.Refused):
            mcp.get_run_detail(caller, run_id=call)
    owner_caller = principal_for_membership(Membership.objects.get(user=alice, workspace=workspace))
    assert call in {r["id"] for r in mcp.list_runs(owner_caller)["runs"]}
    assert authorize_run(alice, call) is not None and authorize_run(bob, "run_secret") is not None
    assert mcp.get_run_detail(owner_caller, run_id=call)["id"] == call
    owner = _client(alice)
    page = owner.get(f"/runs/{call}/")
    assert page.status_code == 200 and RATIONALE in page.content.decode()
    assert call in owner.get("/runs/").content.decode()
    assert [r["id"] for r in owner.get(f"/goto/?q={call}").json()["runs"]] == [call]
    assert owner.get(f"/api/runs/{call}").status_code == 200
    assert call in {r["id"] for r in owner.get("/api/runs?limit=100").json()}


def test_showing_proposals_to_reviewers_is_refused_until_the_judge_is_calibrated(
    alice, bob, workspace, workflow, judge, fake, pending
):
    with pytest.raises(ActionError) as refused:
        judge_actions.do_set_policy(judge, show_to_reviewers=True)
    assert refused.value.code == NOT_CALIBRATED == "JUDGE_NOT_CALIBRATED"
    assert "0 human-decided items" in refused.value.message
    calibrate(judge, waiting_run(workspace, workflow, "run_cal"), n=49)
    with pytest.raises(ActionError) as refused:  # one item short
        judge_actions.do_set_policy(judge, show_to_reviewers=True)
    assert refused.value.code == NOT_CALIBRATED and "49 human-decided items" in refused.value.message
    response = _client(alice).put(
        f"/api/judges/{judge.judge_id}/policy",
        json.dumps({"showToReviewers": True}),
        content_type="application/json",
    )
    assert response.status_code == 409 and response.json()["code"] == "JUDGE_NOT_CALIBRATED"
    assert not GateJudge.objects.get(pk=judge.pk).show_to_reviewers
    # nothing else in a refused request is saved either
    with pytest.raises(ActionError):
        judge_actions.do_set_policy(judge, show_to_reviewers=True, audit_percent=50)
    assert GateJudge.objects.get(pk=judge.pk).audit_percent == 10

    calibrate(judge, waiting_run(workspace, workflow, "run_cal2"), n=1)  # 50: calibrated
    response = _client(alice).put(
        f"/api/judges/{judge.judge_id}/policy",
        json.dumps({"showToReviewers": True}),
        content_type="application/json",
    )
    assert response.status_code == 200 and response.json()["showToReviewers"] is True
    # now reviewers see a pending proposal before they decide
    fake.script(verdict("reject", 0.61, "totals missing"))
    judge_actions.judge_run(waiting_run(workspace, workflow, "run_shown").pk)
    html = _client(bob).get(f"/judges/{judge.judge_id}/").content.decode()
    table = _proposals_table(html)
    assert "run_shown" in table and "badge-rejected" in table and "0.61" in table
    assert 'id="withheld"' not in html
    # turning it off is always allowed
    assert not judge_actions.do_set_policy(judge, show_to_reviewers=False).show_to_reviewers


def test_adding_every_matching_run_to_a_dataset_leaves_the_judges_calls_to_their_owners(
    alice, bob, workspace, judge, pending
):
    """A reviewer curating a dataset from the runs list's filter ("Add all runs matching") gets the
    runs the list shows them: not the judge's own call runs, whose model answer is the proposal."""
    run, proposal = pending
    _client(bob).post("/evals/datasets/add-runs/", {"all": "1", "q": "", "new_name": "by bob"})
    sources = _sources(Dataset.objects.get(name="by bob"))
    assert run.run_id in sources and proposal.judge_run_id not in sources
    _client(alice).post("/evals/datasets/add-runs/", {"all": "1", "q": "", "new_name": "by alice"})
    sources = _sources(Dataset.objects.get(name="by alice"))
    assert {run.run_id, proposal.judge_run_id} <= sources
