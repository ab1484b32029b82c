"""Agreement measured against people, and delegation earned by it (issue 50's acceptance):
kappa on the page equals scikit-learn's; delegation refused at 49 items and below the floor,
allowed above; the audit share goes to people; drift suspends and tells the owners once; and a
gate nobody delegated is never decided by a judge."""

from __future__ import annotations

import json

import pytest
from django.tasks import default_task_backend
from django.test import Client
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from judges import actions as judge_actions
from judges.models import GateJudge, Proposal
from judges.selectors import agreement_of
from review.rules import in_sample
from runs.actions import ActionError
from runs.actions.forks import do_fork_with_history
from runs.actions.overrule import do_overrule
from runs.models import Delivery, Event
from runs.notifications import messages
from runs.selectors.runs import run_state
from tests.judges.conftest import decide, verdict, waiting_run

pytestmark = pytest.mark.django_db

WORD = {"approved": "approve", "rejected": "reject"}


class Gates:
    def __init__(self, workspace, workflow, judge, fake):
        self.workspace, self.workflow, self.judge, self.fake = workspace, workflow, judge, fake
        self.n = 0

    def judged(self, judge_says: str, confidence: float = 0.95):
        """A new run waiting at the judge's gate, judged (the fake answers ``judge_says``)."""
        self.n += 1
        run = waiting_run(self.workspace, self.workflow, f"run_g{self.n:03d}")
        self.fake.script(verdict(WORD[judge_says], confidence))
        judge_actions.judge_run(run.pk)
        return run

    def labelled(self, judge_says: str, person: str):
        run = self.judged(judge_says)
        decide(self.workspace, run, person)
        judge_actions.judge_run(run.pk)
        return run


@pytest.fixture
def gates(workspace, workflow, judge, fake):
    return Gates(workspace, workflow, judge, fake)


def _agreeing(gates, n: int) -> None:
    for i in range(n):
        decision = "approved" if i % 2 == 0 else "rejected"
        gates.labelled(decision, decision)


def test_kappa_on_the_page_and_the_api_equals_scikit_learns(alice, gates, judge):
    people = ["approved"] * 40 + ["rejected"] * 20
    judged = list(people)
    for i in (0, 1, 2):  # three approvals the judge would have rejected
        judged[i] = "rejected"
    for i in (40, 41, 42):  # three rejections it would have approved
        judged[i] = "approved"
    for says, person in zip(judged, people, strict=True):
        gates.labelled(says, person)
    assert sum(a == b for a, b in zip(judged, people, strict=True)) == 54
    expected = cohen_kappa_score(judged, people)
    (tn, fp), (fn, tp) = confusion_matrix(people, judged, labels=["rejected", "approved"])

    client = Client()
    client.force_login(alice)
    page = client.get(f"/judges/{judge.judge_id}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert f'<dd data-stat="2">{expected:.3f}</dd>' in html and '<dd data-stat="1">60</dd>' in html
    assert "<polyline" in html or "<circle" in html  # the kappa over time
    doc = client.get(f"/api/judges/{judge.judge_id}").json()["agreement"]
    assert doc["kappa"] == pytest.approx(expected, abs=1e-12)
    assert doc["confusion"] == {"tp": tp, "fp": fp, "fn": fn, "tn": tn} and doc["n"] == 60
    assert doc["tpr"] == pytest.approx(tp / (tp + fn)) and doc["tnr"] == pytest.approx(tn / (tn + fp))
    low, high = doc["kappaInterval"]
    assert low < expected < high
    # 0.775 is below the default floor: delegation is refused, over the API with a code
    response = client.put(
        f"/api/judges/{judge.judge_id}/policy",
        json.dumps({"delegation": "approve"}),
        content_type="application/json",
    )
    assert response.status_code == 409 and response.json()["code"] == "DELEGATION_NOT_EARNED"
    assert "below the floor" in response.json()["error"]
    judge.refresh_from_db()
    assert judge.delegation == "off"


def test_delegation_is_refused_at_49_items_and_allowed_at_50(gates, judge):
    _agreeing(gates, 49)
    with pytest.raises(ActionError) as refused:
        judge_actions.do_set_policy(judge, delegation="approve")
    assert refused.value.code == "DELEGATION_NOT_EARNED" and "49 human-decided items" in refused.value.message
    with pytest.raises(ActionError) as low:
        judge_actions.do_set_policy(judge, kappa_floor=0.5)
    assert low.value.code == "FLOOR_TOO_LOW"
    _agreeing(gates, 1)
    judge = judge_actions.do_set_policy(judge, delegation="approve", kappa_floor=0.9)
    assert judge.delegation == "approve" and judge.kappa_floor == 0.9 and judge.delegated_at is not None


def test_delegated_gates_are_decided_by_the_judge_and_the_audit_share_goes_to_people(workspace, gates, judge):
    _agreeing(gates, 50)
    judge = judge_actions.do_set_policy(judge, delegation="approve", min_confidence=0.9)
    before = len(gates.fake.requests)
    runs = [gates.judged("approved") for _ in range(30)]
    low = gates.judged("approved", confidence=0.5)  # under the confidence: people decide
    rejecting = gates.judged("rejected")  # approve-only: a rejection is left to people
    assert len(gates.fake.requests) - before == 32  # one shadow call per gate, nothing more

    audit = [r for r in runs if in_sample(f"{r.run_id}|review|PAUSE_BEFORE||implied", 10)]
    assert 0 < len(audit) < len(runs)
    for run in runs:
        run.refresh_from_db()
        decided = Event.objects.filter(run=run, type="human_gate_resolved").first()
        proposal = Proposal.objects.get(run=run)
        if run in audit:
            assert decided is None and proposal.audit and run_state(run).pending_gates()
        else:
            assert decided is not None and decided.actor == "judge:reviewer@1"
            assert proposal.delegated and proposal.policy["kappa"] == 1.0 and proposal.policy["items"] == 50
            assert "under its delegation policy" in decided.body
    for run in (low, rejecting):
        assert not Event.objects.filter(run=run, type="human_gate_resolved").exists()
    assert Proposal.objects.filter(judge=judge, delegated=True).count() == len(runs) - len(audit)


def test_drift_on_the_audit_sample_suspends_delegation_and_tells_the_owners_once(
    alice, workspace, gates, judge
):
    alice.email = "alice@example.test"
    alice.save()
    _agreeing(gates, 50)
    judge = judge_actions.do_set_policy(judge, delegation="both", audit_percent=50, show_to_reviewers=True)
    suspended_after = None
    for i in range(40):
        run = gates.judged("approved")
        proposal = Proposal.objects.get(run=run)
        if proposal.audit:  # people now reject what the judge approves: drift
            decide(workspace, run, "rejected")
            judge_actions.judge_run(run.pk)
        judge.refresh_from_db()
        if judge.suspended_at is not None and suspended_after is None:
            suspended_after = i
    assert suspended_after is not None and "below the floor" in judge.suspended_reason
    told = Delivery.objects.filter(workspace=workspace, event_type="judge.suspended")
    assert told.count() == 1 and told.get().recipient == alice
    message = json.loads(told.get().payload)
    data = message["data"]
    assert data["judge"]["label"] == "reviewer@1" and data["hiddenFromReviewers"] is True
    # shown to reviewers only while calibrated: drift hides the proposals again, and says so
    assert judge.show_to_reviewers is False
    assert "hidden from reviewers again" in "\n".join(messages.lines(message)[1])
    # after the suspension every gate goes to people
    run = gates.judged("approved")
    assert not Event.objects.filter(run=run, type="human_gate_resolved").exists()
    assert not Proposal.objects.get(run=run).delegated


def test_nobody_asked_a_gate_without_a_delegation_policy_is_never_decided_by_a_judge(gates, judge):
    _agreeing(gates, 60)  # a perfect record: still nobody delegated the gate
    assert GateJudge.objects.get(pk=judge.pk).delegation == "off"
    before = len(gates.fake.requests)
    runs = [gates.judged("approved", confidence=1.0) for _ in range(10)]
    for run in runs:
        judge_actions.judge_run(run.pk)  # looked at again: still nothing
        assert not Event.objects.filter(run=run, type="human_gate_resolved").exists()
        assert run_state(run).pending_gates()
    assert len(gates.fake.requests) - before == 10  # the shadow run's call per gate, no other
    assert not Proposal.objects.filter(delegated=True).exists()
    assert not Event.objects.filter(type="human_gate_resolved", actor__startswith="judge:").exists()


def test_people_overruling_delegated_decisions_count_as_disagreements_and_suspend_it(
    alice, workspace, gates, judge, django_capture_on_commit_callbacks
):
    """Nobody audits a delegated decision a person overrules (a fork from before it, runs.actions
    .overrule): the overrule is that person's label, so a judge people keep overruling loses its
    delegation although its audit sample has too few decisions to say so."""
    _agreeing(gates, 50)
    judge = judge_actions.do_set_policy(judge, delegation="approve", min_confidence=0.9)
    overruled = 0
    for _ in range(30):
        run = gates.judged("approved")
        proposal = Proposal.objects.get(run=run)
        if not proposal.delegated:
            continue  # the audit share: people decide it, as any gate
        if not overruled:  # a fork from the judge's decision that names no decision labels nothing
            branch = do_fork_with_history(
                workspace=workspace, source_run_id=run.run_id, mode="branch", from_seq=proposal.outcome_seq,
                actor="user:bob",
            )  # fmt: skip
            judge_actions.judge_run(branch.run.pk)
            proposal.refresh_from_db()
            assert proposal.overruled == "" and agreement_of(judge)["n"] == 50
        default_task_backend.clear()
        with django_capture_on_commit_callbacks(execute=True):
            fork = do_overrule(
                workspace=workspace, run_id=run.run_id, seq=proposal.outcome_seq, decision="rejected",
                note="wrong vendor", actor="user:bob",
            )  # fmt: skip
        queued = [r.args for r in default_task_backend.results if r.task.name == "judge_run"]
        assert [fork.run.pk] in queued  # the overrule queues the judges' task of the fork
        judge_actions.judge_run(fork.run.pk)
        judge_actions.judge_run(fork.run.pk)  # the task again (a retry): counted once
        overruled += 1
        proposal.refresh_from_db()
        assert (proposal.overruled, proposal.overruled_by, proposal.outcome) == (
            "rejected",
            "user:bob",
            "approved",
        )
        assert agreement_of(judge)["n"] == 50 + overruled
        judge.refresh_from_db()
        if judge.suspended_at is not None:
            break
    assert judge.suspended_at is not None and "below the floor" in judge.suspended_reason
    stats = agreement_of(judge)
    assert stats["matrix"]["fp"] == overruled and stats["kappa"] < judge.kappa_floor
    assert sum(1 for p in Proposal.objects.filter(judge=judge) if p.label == "rejected") == 25 + overruled
    client = Client()
    client.force_login(alice)
    page = client.get(f"/judges/{judge.judge_id}/").content.decode()
    assert page.count("overruled: rejected</span> by user:bob") == overruled
