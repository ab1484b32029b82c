"""Replay and branch re-executed by the workbench: step code registered through the host API,
model calls through the real Anthropic SDK against the loopback fake (which counts requests)."""

from __future__ import annotations

import pytest

from runs.actions.forks import determinism_report, do_fork_with_history
from runs.engine import programs
from runs.engine.divergence import DIVERGED_TAG, comparable, is_marker
from runs.execution.host import Workbench
from runs.execution.replay import run_fork
from runs.models import CachedResponse, Event, ForkStatus, Run
from runs.providers.base import ProviderSettings
from tests.fakes.anthropic_api import FakeAnthropic

WORKFLOW = {
    "id": "ticket-summary",
    "version": 1,
    "steps": [
        {"id": "draft"},
        {"id": "review", "gatePolicy": "PAUSE_BEFORE"},
        {"id": "publish"},
    ],
    "edges": [{"id": "e1", "from": "draft", "to": "review"}, {"id": "e2", "from": "review", "to": "publish"}],
}


class Pipeline:
    """Step code whose prompt and code a test can change between the recording and the replay."""

    def __init__(self, url: str) -> None:
        self.provider = ProviderSettings(
            kind="anthropic",
            api_key="test-anthropic-key",
            base_url=url,
            max_retries=0,
            egress_allow=("127.0.0.0/8",),  # the operator's allowance for the loopback fake
        )
        self.prompt = "Summarise ticket 42"
        self.extra_tool_call = False

    def ask(self, s, step: str, text: str, correlation: str):
        request = {
            "model": "claude-haiku-4-5",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": text}],
        }
        return s.model_call(self.provider, request, step_id=step, correlation_id=correlation)

    def __call__(self, s) -> None:
        s.begin_step("draft")
        answer = self.ask(s, "draft", self.prompt, "c-draft")
        if self.extra_tool_call:
            s.log_tool_call("spellcheck", args={"text": answer.text}, step_id="draft")
        s.log_tool_call("store_summary", args={"text": answer.text}, step_id="draft")
        s.complete_step("draft")
        s.begin_step("review")  # PAUSE_BEFORE: asks for a review first
        if s.gate_decision("review", "PAUSE_BEFORE", "approved", note="fine") != "approved":
            s.annotate("review rejected: nothing published", tags=["rejected"])
            s.fail("review rejected")
            return
        s.begin_step("review")
        s.complete_step("review")
        s.begin_step("publish")
        self.ask(s, "publish", f"Write a release note for: {answer.text}", "c-publish")
        s.complete_step("publish")
        s.complete()


@pytest.fixture
def fake():
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def pipeline(fake, settings):
    settings.WORKBENCH_EGRESS_ALLOW = ["127.0.0.0/8", "::1/128"]  # the fake listens on loopback
    program = Pipeline(fake.url)
    programs.register(WORKFLOW["id"], program)
    yield program
    programs.unregister(WORKFLOW["id"])


@pytest.fixture
def recorded(workspace, pipeline, fake) -> Run:
    wb = Workbench(workspace=workspace, actor="pipeline")
    session = wb.run_workflow(workflow=WORKFLOW)
    assert len(fake.requests) == 2
    run = session.run
    assert run.status == "completed"
    return run


def bodies(run: Run) -> list[dict]:
    return [e.data for e in Event.objects.filter(run=run).order_by("seq")]


def replay(workspace, source: Run, **kw):
    fork = do_fork_with_history(workspace=workspace, source_run_id=source.run_id, actor="user:alice", **kw)
    assert fork.status == ForkStatus.PENDING
    fork = run_fork(fork.pk)
    assert fork is not None
    return fork


@pytest.mark.django_db
@pytest.mark.parametrize("from_seq", [0, 5, 9])
def test_replay_with_cached_answers_calls_no_provider_and_scores_one(workspace, recorded, fake, from_seq):
    assert CachedResponse.objects.filter(workspace=workspace).count() == 2
    before = len(fake.requests)
    fork = replay(workspace, recorded, mode="replay", from_seq=from_seq)
    assert len(fake.requests) == before  # 0 provider requests
    assert fork.status == ForkStatus.COMPLETED, fork.error_message
    report = determinism_report(fork)
    assert report["score"] == 1.0
    assert report["firstDivergenceSeq"] is None
    assert report["comparedEvents"] == recorded.last_seq - max(from_seq - 1, 0)
    assert report["cacheHits"] >= 1 or from_seq > 9
    source = bodies(recorded)
    own = [e for e in bodies(fork.run) if not is_marker(e)]
    assert [comparable(e) for e in own] == [comparable(e) for e in source]
    history = max(from_seq - 1, 0)
    assert [e["id"] for e in own[:history]] == [e["id"] for e in source[:history]]  # fixed history kept
    assert fork.run.status == "completed"
    recorded.refresh_from_db()
    assert recorded.last_seq == len(source)  # the source is untouched


@pytest.mark.django_db
def test_changed_prompt_diverges_at_the_first_different_event_and_finishes(
    workspace, recorded, pipeline, fake
):
    source = bodies(recorded)
    request_seq = next(
        i + 1 for i, e in enumerate(source) if e["type"] == "model_io" and e["direction"] == "request"
    )
    pipeline.prompt = "Summarise ticket 43"
    before = len(fake.requests)
    fork = replay(workspace, recorded, mode="replay", from_seq=0)
    assert fork.status == ForkStatus.COMPLETED
    assert fork.run.status == "completed"
    report = determinism_report(fork)
    assert report["firstDivergenceSeq"] == request_seq
    assert report["score"] < 1
    assert len(fake.requests) > before  # a new request goes to the provider
    notes = [
        e for e in bodies(fork.run) if e["type"] == "annotation" and DIVERGED_TAG in (e.get("tags") or [])
    ]
    assert len(notes) == 1
    assert f'"divergencePoint":{request_seq}' in notes[0]["text"]
    assert fork.divergence["original"]["payload"]["messages"][0]["content"] == "Summarise ticket 42"


@pytest.mark.django_db
def test_changed_step_code_diverges_and_scores_below_one(workspace, recorded, pipeline, fake):
    pipeline.extra_tool_call = True
    before = len(fake.requests)
    fork = replay(workspace, recorded, mode="replay")
    report = determinism_report(fork)
    assert fork.run.status == "completed"
    assert report["score"] < 1
    source = bodies(recorded)
    first_tool = next(i + 1 for i, e in enumerate(source) if e["type"] == "tool_call")
    assert report["firstDivergenceSeq"] == first_tool
    assert len(fake.requests) == before  # the model requests themselves are unchanged: cached


@pytest.mark.django_db
def test_branch_from_the_gate_with_the_opposite_decision_takes_the_other_path(workspace, recorded, fake):
    source = bodies(recorded)
    resolved = next(i + 1 for i, e in enumerate(source) if e["type"] == "human_gate_resolved")
    before = len(fake.requests)
    fork = replay(
        workspace,
        recorded,
        mode="branch",
        from_seq=resolved,
        overlay={"gateDecisions": {"review": "rejected"}},
    )
    assert fork.status == ForkStatus.COMPLETED
    events = bodies(fork.run)
    decisions = [e["decision"] for e in events if e["type"] == "human_gate_resolved"]
    assert decisions == ["rejected"]
    assert not any(e["type"] == "step_started" and e["stepId"] == "publish" for e in events)
    assert fork.run.status == "failed"
    assert len(fake.requests) == before  # the draft's answer is fixed history
    # same branch with the recorded decision goes the original way (and asks the provider anew)
    again = replay(workspace, recorded, mode="branch", from_seq=resolved, overlay={"tags": ["what-if"]})
    assert again.run.status == "completed"
    assert "what-if" in again.run.tags
    assert len(fake.requests) == before + 1


@pytest.mark.django_db
def test_replay_fails_with_a_code_when_the_cached_answers_were_deleted(workspace, recorded, fake):
    from runs.actions import ActionError

    CachedResponse.objects.filter(workspace=workspace).delete()
    with pytest.raises(ActionError) as info:
        do_fork_with_history(workspace=workspace, source_run_id=recorded.run_id, mode="replay")
    assert info.value.code == "REPLAY_DATA_EXPIRED"
    # from after the last model answer nothing deleted is needed
    fork = replay(workspace, recorded, mode="replay", from_seq=recorded.last_seq)
    assert fork.status == ForkStatus.COMPLETED


@pytest.mark.django_db
def test_cache_is_never_shared_across_workspaces(workspace, other_workspace, recorded, pipeline, fake):
    wb = Workbench(workspace=other_workspace, actor="pipeline")
    before = len(fake.requests)
    wb.run_workflow(workflow=WORKFLOW)
    assert len(fake.requests) == before + 2  # a live run asks the provider, not acme's answers
    from runs.actions import responsecache

    key = CachedResponse.objects.filter(workspace=workspace).first().key
    assert responsecache.lookup(other_workspace, key) is not None  # its own recording
    assert {c.workspace_id for c in CachedResponse.objects.filter(key=key)} == {
        workspace.pk,
        other_workspace.pk,
    }


@pytest.mark.django_db
def test_demo_pipeline_replays_deterministically(workspace, settings):
    from runs.demo.job_search import JOB_SEARCH_WORKFLOW, job_search_program
    from runs.execution.replay import run_program

    wb = Workbench(workspace=workspace, actor="pipeline:job-search")
    source = run_program(wb, workflow=JOB_SEARCH_WORKFLOW, program=job_search_program).run
    fork = replay(workspace, source, mode="replay", from_seq=12)
    assert determinism_report(fork)["score"] == 1.0
    branch = replay(
        workspace,
        source,
        mode="branch",
        from_seq=12,
        overlay={"configurable": {"draftModel": "claude-haiku-4-5"}},
    )
    models = [
        e.get("model") for e in bodies(branch.run) if e["type"] == "model_io" and e.get("stepId") == "draft"
    ]
    assert models and set(models) == {"claude-haiku-4-5"}


@pytest.mark.django_db
def test_a_replay_fails_with_a_code_when_its_answers_are_deleted_after_the_fork(workspace, recorded, fake):
    fork = do_fork_with_history(workspace=workspace, source_run_id=recorded.run_id, mode="replay")
    CachedResponse.objects.filter(workspace=workspace).delete()
    before = len(fake.requests)
    done = run_fork(fork.pk)
    assert done.status == ForkStatus.FAILED and done.error_code == "REPLAY_DATA_EXPIRED"
    assert done.run.status == "failed"
    assert len(fake.requests) == before  # never asks the provider instead


def redacted_copy(workspace, run: Run) -> Run:
    from runs.actions import do_import_bundle
    from runs.selectors.bundles import export_bundle_bytes

    return do_import_bundle(workspace=workspace, data=export_bundle_bytes(run, redact="user"), as_new_id=True)


@pytest.mark.django_db
def test_a_replay_of_a_redacted_run_does_not_bring_back_what_was_redacted(workspace, recorded, fake):
    copy = redacted_copy(workspace, recorded)
    assert not any("payload" in e for e in bodies(copy) if e["type"] == "model_io")
    before = len(fake.requests)
    fork = replay(workspace, copy, mode="replay")
    assert len(fake.requests) == before  # the workspace's cache still knows the answers...
    assert fork.status == ForkStatus.COMPLETED, fork.error_message
    events = bodies(fork.run)
    assert [
        e for e in events if e["type"] == "model_io" and "payload" in e
    ] == []  # ...but they stay redacted
    assert [e for e in events if e["type"] == "tool_call" and "args" in e] == []
    assert determinism_report(fork)["score"] == 1.0  # the same redacted events as the source's
    own = [comparable(e) for e in events if not is_marker(e)]
    assert own == [comparable(e) for e in bodies(copy)]  # nothing the source does not hold


@pytest.mark.django_db
def test_a_replay_of_a_redacted_run_without_cached_answers_fails_with_a_code(
    workspace, other_workspace, recorded, fake
):
    copy = redacted_copy(other_workspace, recorded)  # another workspace: no answers cached there
    before = len(fake.requests)
    fork = replay(other_workspace, copy, mode="replay")
    assert fork.status == ForkStatus.FAILED and fork.error_code == "REPLAY_DATA_EXPIRED"
    assert len(fake.requests) == before
