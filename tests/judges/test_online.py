"""Online evaluation: the judges score a sample of live runs once they finish (an SDK-style run and
an OTLP-ingested trace), as annotations, never decisions, through the background task; a new
version re-scores the runs the older one scored, its equal model requests answered from the
response cache (the fake counts no new request)."""

from __future__ import annotations

import pytest
from django.tasks import default_task_backend
from django.test import Client

from judges import actions as judge_actions
from judges import online
from judges.models import OnlineScore, ProposalStatus
from judges.rescore import do_rescore
from runs import actions
from runs.actions import ActionError
from runs.actions.otlp import do_end_quiet_traces, do_ingest_spans
from runs.engine import commands as cmd
from runs.models import Event, Run
from tests.judges.conftest import verdict
from tests.telemetry.otlp_span_fixtures import openinference_trace

pytestmark = pytest.mark.django_db

LIVE = {"id": "wf-live", "version": 1, "steps": [{"id": "answer"}], "edges": []}
CONFIG = {
    "provider": "anthropic",
    "model": "claude-haiku-4-5",
    "prompt": "judges/review-gate",
    "promptVersion": 1,
}


def online_judge(workspace, workflow_id: str, step_id: str, percent: float = 100):
    judge = judge_actions.do_create_judge(
        workspace=workspace, name=f"live-{workflow_id}", kind="llm", workflow_id=workflow_id,
        step_id=step_id, gate="PAUSE_AFTER", config=CONFIG,
    )  # fmt: skip
    return judge_actions.do_set_policy(judge, online_percent=percent)


def finished_sdk_run(workspace, run_id: str) -> Run:
    actions.do_start_run(workspace=workspace, workflow=LIVE, run_id=run_id, actor="token:host")
    actions.do_commands(
        workspace=workspace,
        run_id=run_id,
        commands=[cmd.BeginStep(step_id="answer"), cmd.CompleteStep(step_id="answer"), cmd.CompleteRun()],
        actor="token:host",
    )
    return Run.objects.get(workspace=workspace, run_id=run_id)


def test_a_finished_sdk_run_is_scored_once_as_an_annotation(
    workspace, judge_prompt, fake, django_capture_on_commit_callbacks
):
    judge = online_judge(workspace, "wf-live", "answer")
    default_task_backend.clear()
    with django_capture_on_commit_callbacks(execute=True):
        run = finished_sdk_run(workspace, "run_live1")
    queued = [r for r in default_task_backend.results if r.task.name == "score_online"]
    assert [r.args for r in queued] == [[run.pk]]  # queued once: when the run finished
    fake.script(verdict("approve", 0.8, "a complete answer"))
    assert online.score_run(run.pk) == "scored by 1"
    score = OnlineScore.objects.get(judge=judge, run=run)
    assert (score.status, score.decision, score.confidence) == (ProposalStatus.PROPOSED, "approved", 0.8)
    note = Event.objects.get(run=run, type="annotation")
    assert note.actor == judge.actor and "judge-score" in note.body and "a complete answer" in note.body
    assert not Event.objects.filter(run=run, type="human_gate_resolved").exists()
    assert online.score_run(run.pk) == "scored by 0" and len(fake.requests) == 1  # once


def test_an_otlp_ingested_trace_is_scored_when_it_ends(workspace, judge_prompt, fake):
    judge = online_judge(workspace, "otel", "trace")
    report = do_ingest_spans(workspace=workspace, spans=openinference_trace())
    (run_id,) = report.created
    run = Run.objects.get(workspace=workspace, run_id=run_id)
    assert online.score_run(run.pk) == "not finished"  # still running: nothing scored
    do_end_quiet_traces(quiet_seconds=0)
    fake.script(verdict("reject", 0.7, "the tool answer is not used"))
    assert online.score_run(run.pk) == "scored by 1"
    assert OnlineScore.objects.get(judge=judge, run=run).decision == "rejected"
    assert Event.objects.filter(run=run, type="annotation", actor=judge.actor).count() == 1


def test_the_sample_and_no_judge_without_online_evaluation(workspace, judge_prompt, fake):
    online_judge(workspace, "wf-live", "answer", percent=0)  # off: nothing scored
    runs = [finished_sdk_run(workspace, f"run_s{n}") for n in range(20)]
    assert {online.score_run(r.pk) for r in runs} == {"scored by 0"} and fake.requests == []
    judge = online_judge(workspace, "wf-live", "answer", percent=30)  # a new version, 30 %
    for _ in runs:
        fake.script(verdict("approve"))
    for run in runs:
        online.score_run(run.pk)
    scored = set(OnlineScore.objects.filter(judge=judge).values_list("run__run_id", flat=True))
    assert scored == {r.run_id for r in runs if online.sampled(judge, r)} and 0 < len(scored) < 20
    assert len(fake.requests) == len(scored)


def test_a_new_version_rescores_with_cached_answers(
    workspace, judge_prompt, fake, django_capture_on_commit_callbacks
):
    first = online_judge(workspace, "wf-live", "answer")
    runs = [finished_sdk_run(workspace, f"run_r{n}") for n in range(3)]
    for run in runs:
        fake.script(verdict("approve", 0.9, "fine"))
        online.score_run(run.pk)
    assert len(fake.requests) == 3
    with pytest.raises(ActionError) as nothing:
        do_rescore(first)
    assert nothing.value.code == "NOTHING_TO_RESCORE"

    second = online_judge(workspace, "wf-live", "answer")  # same prompt version and model
    assert second.version == 2
    default_task_backend.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert do_rescore(second) == 3
    (task,) = [r for r in default_task_backend.results if r.task.name == "rescore_judge"]
    assert online.rescore(*task.args) == 3
    assert len(fake.requests) == 3  # every answer came from the response cache
    rescored = OnlineScore.objects.filter(judge=second)
    assert rescored.count() == 3 and {s.decision for s in rescored} == {"approved"}
    assert all(s.status == ProposalStatus.PROPOSED for s in rescored)


def test_the_judge_page_rescores_for_owners_only(
    alice, bob, workspace, judge_prompt, fake, django_capture_on_commit_callbacks
):
    first = online_judge(workspace, "wf-live", "answer")
    fake.script(verdict("approve"))
    online.score_run(finished_sdk_run(workspace, "run_p1").pk)
    second = online_judge(workspace, "wf-live", "answer")
    owner, reviewer = Client(), Client()
    owner.force_login(alice)
    reviewer.force_login(bob)
    page = owner.get(f"/judges/{first.judge_id}/").content.decode()
    assert "1 run scored by this version" in page and "Re-score" not in page  # version 1: nothing older
    assert reviewer.post(f"/judges/{second.judge_id}/rescore/").status_code == 403
    default_task_backend.clear()
    with django_capture_on_commit_callbacks(execute=True):
        response = owner.post(f"/judges/{second.judge_id}/rescore/", follow=True)
    assert "Re-scoring 1 run with live-wf-live@2" in response.content.decode()
    assert [r.args for r in default_task_backend.results if r.task.name == "rescore_judge"] == [[second.pk]]
