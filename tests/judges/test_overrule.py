"""Overruling a machine decision: from the gate panel, one POST forks the run from before the gate
a judge decided, with the reviewer's own decision; the judge's decision stays on the source. The
inbox's history shows the judge's decision as a machine decision."""

from __future__ import annotations

import pytest
from django.test import Client

from judges import actions as judge_actions
from judges.models import Proposal
from runs import actions
from runs.actions import ActionError
from runs.actions.forks import do_fork_with_history
from runs.actions.overrule import do_overrule
from runs.engine import commands as cmd
from runs.models import Event, Run, RunFork
from runs.selectors.runs import run_state
from tests.judges.conftest import decide, verdict, waiting_run

pytestmark = pytest.mark.django_db


def machine_decided(workspace, workflow, run_id: str = "run_m1", decision: str = "approved"):
    """A run whose review gate the judge reviewer@1 decided (as judges.actions._decide records it)."""
    run = waiting_run(workspace, workflow, run_id)
    result = actions.do_command(
        workspace=workspace,
        run_id=run_id,
        command=cmd.ResolveGate(
            step_id="review", gate="PAUSE_BEFORE", decision=decision, note="Decided by judge reviewer@1"
        ),
        actor="judge:reviewer@1",
        channel="judge",
    )
    run.refresh_from_db()
    return run, result.last_seq


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_reviewer_overrules_a_machine_decision_in_one_action(bob, workspace, workflow):
    run, seq = machine_decided(workspace, workflow)
    client = _client(bob)
    panel = client.get(f"/runs/{run.run_id}/").content.decode()
    assert "machine decision" in panel and f'data-overrule="{seq}"' in panel and "Fork and reject" in panel

    response = client.post(
        f"/runs/{run.run_id}/gates/overrule/", {"seq": seq, "decision": "rejected", "note": "wrong vendor"}
    )
    assert response.status_code == 302
    fork = RunFork.objects.get(source=run)
    assert response["Location"] == f"/runs/{fork.run.run_id}/#gates"
    assert (fork.mode, fork.from_seq, fork.overlay["tags"]) == ("branch", seq, ["overrule"])
    # the fork: the source's history before the judge's decision, then bob's own decision
    decisions = list(
        Event.objects.filter(run=fork.run, type="human_gate_resolved").values_list("actor", "body")
    )
    assert len(decisions) == 1 and decisions[0][0] == "user:bob"
    assert '"decision":"rejected"' in decisions[0][1] and "wrong vendor" in decisions[0][1]
    assert "Overrules judge:reviewer@1" in decisions[0][1]
    assert not run_state(Run.objects.get(pk=fork.run.pk)).pending_gates()
    # the source keeps the judge's decision: a machine decision is never hidden, nor rewritten
    assert Event.objects.get(run=run, seq=seq).actor == "judge:reviewer@1"
    page = client.get(f"/runs/{fork.run.run_id}/").content.decode()
    assert "by user:bob" in page and run.run_id in page


def test_the_inbox_history_shows_the_machine_decision_as_the_judges(bob, workspace, workflow):
    run, _seq = machine_decided(workspace, workflow)
    person = waiting_run(workspace, workflow, "run_m2")
    decide(workspace, person, "rejected", actor="user:alice")
    html = _client(bob).get("/runs/inbox/").content.decode()
    section = html[html.index('id="recent-decisions"') :]
    assert section.count("machine decision") == 1 and "by judge:reviewer@1" in section
    assert "by user:alice" in section and "Overrule in the run" in section


@pytest.mark.parametrize(
    ("decider", "decision", "code"),
    [
        ("user:alice", "rejected", "NOT_A_MACHINE_DECISION"),  # a person's decision is not overruled
        ("judge:reviewer@1", "approved", "SAME_DECISION"),
        ("judge:reviewer@1", "edited", "INVALID_INPUT"),
    ],
)
def test_refusals_change_nothing(workspace, workflow, decider, decision, code):
    run = waiting_run(workspace, workflow, "run_m3")
    decide(workspace, run, "approved", actor=decider)
    seq = Event.objects.get(run=run, type="human_gate_resolved").seq
    with pytest.raises(ActionError) as refused:
        do_overrule(workspace=workspace, run_id=run.run_id, seq=seq, decision=decision, actor="user:bob")
    assert refused.value.code == code
    assert not RunFork.objects.exists() and Run.objects.count() == 1


def test_a_viewer_may_not_overrule_and_another_workspace_sees_nothing(vera, charlie, workspace, workflow):
    run, seq = machine_decided(workspace, workflow)
    assert "Overrule" not in _client(vera).get(f"/runs/{run.run_id}/").content.decode()
    assert (
        _client(vera)
        .post(f"/runs/{run.run_id}/gates/overrule/", {"seq": seq, "decision": "rejected"})
        .status_code
        == 403
    )
    assert (
        _client(charlie)
        .post(f"/runs/{run.run_id}/gates/overrule/", {"seq": seq, "decision": "rejected"})
        .status_code
        == 404
    )
    assert not RunFork.objects.exists()


def test_no_judge_decides_the_gate_a_branch_names(workspace, workflow, judge, fake):
    """A branch whose creator named review's decision (as an overrule's does, for a fork the workbench
    re-executes): while it waits there, the judge watching that gate neither proposes nor decides."""
    run, seq = machine_decided(workspace, workflow)
    fork = do_fork_with_history(
        workspace=workspace, source_run_id=run.run_id, mode="branch", from_seq=seq,
        overlay={"gateDecisions": {"review": "rejected"}}, actor="user:bob", executable=False,
    )  # fmt: skip
    assert run_state(Run.objects.get(pk=fork.run.pk)).pending_gates()  # the gate waits in the fork
    judge_actions.judge_run(fork.run.pk)
    assert not Proposal.objects.filter(run=fork.run).exists() and fake.requests == []
    # a fork that names no decision is judged like any run
    plain = do_fork_with_history(
        workspace=workspace, source_run_id=run.run_id, mode="branch", from_seq=seq, actor="user:bob"
    )
    fake.script(verdict("approve", 0.5))
    judge_actions.judge_run(plain.run.pk)
    assert Proposal.objects.filter(run=plain.run).count() == 1 and len(fake.requests) == 1
