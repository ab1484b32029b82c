"""Replay and branch of playground runs, re-executed by the replay worker through the provider
layer (the official SDKs against the loopback fakes, which count the requests)."""

from __future__ import annotations

import pytest

from playground import compose as c
from playground.models import Execution
from runs.actions import ActionError
from runs.actions.forks import determinism_report, do_fork_with_history
from runs.engine.divergence import DIVERGED_TAG, comparable, is_marker
from runs.execution.replay import run_fork
from runs.models import CachedResponse, Event, ForkStatus, Run, RunFork
from runs.protocol.values import dumps
from tests.playground.test_execute import send

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(workspace, alice, fake_models, django_capture_on_commit_callbacks):
    """``sent(model, session)``: alice's completed playground execution of ``session``."""

    def send_one(model: str, session: c.Session) -> Execution:
        ex = send(workspace, alice, fake_models[model], session, django_capture_on_commit_callbacks)
        assert ex.status == "completed", ex.error_message
        return ex

    return send_one


def bodies(run: Run) -> list[dict]:
    return [e.data for e in Event.objects.filter(run=run).order_by("seq")]


def fork(workspace, run_id: str, **kw) -> RunFork:
    created = do_fork_with_history(workspace=workspace, source_run_id=run_id, actor="user:alice", **kw)
    assert created.status == ForkStatus.PENDING  # the playground's step code is registered
    done = run_fork(created.pk)
    assert done is not None
    return done


def requests_sent(*fakes) -> int:
    return sum(len(f.requests) for f in fakes)


SESSIONS = {
    "anthropic, thinking": ("sonnet", c.set_thinking(c.Session(prompt="What are the terms?"), True)),
    "openai-compatible": ("local", c.Session(prompt="Say hello", system_prompt="Be brief.")),
    "structured output": ("sonnet", c.Session(prompt="Is it valid?", operation_type="validation")),
}


@pytest.mark.parametrize("case", SESSIONS)
@pytest.mark.parametrize("from_seq", [0, 3])
def test_a_replay_answers_from_the_cache_and_scores_one(
    workspace, sent, anthropic_fake, openai_fake, case, from_seq
):
    model, session = SESSIONS[case]
    ex = sent(model, session)
    source = Run.objects.get(run_id=ex.run_id)
    assert CachedResponse.objects.filter(workspace=workspace, run=source).count() == 1
    before = requests_sent(anthropic_fake, openai_fake)

    replay = fork(workspace, source.run_id, mode="replay", from_seq=from_seq)

    assert requests_sent(anthropic_fake, openai_fake) == before  # 0 provider requests
    assert replay.status == ForkStatus.COMPLETED, replay.error_message
    report = determinism_report(replay)
    assert report["score"] == 1.0 and report["firstDivergenceSeq"] is None
    assert report["cacheHits"] == 1 and report["providerCalls"] == 0
    own = [comparable(e) for e in bodies(replay.run) if not is_marker(e)]
    assert own == [comparable(e) for e in bodies(source)]  # chunks, answer artifact and end included
    assert replay.run.status == "completed"


def test_a_changed_prompt_diverges_at_the_request_and_goes_to_the_provider(workspace, sent, anthropic_fake):
    ex = sent("sonnet", c.Session(prompt="Ticket 42"))
    request = ex.request_json
    request["messages"][-1]["content"] = [{"type": "text", "text": "Ticket 43"}]
    Execution.objects.filter(pk=ex.pk).update(request=dumps(request))  # the prompt was changed
    before = len(anthropic_fake.requests)

    replay = fork(workspace, ex.run_id, mode="replay")

    assert len(anthropic_fake.requests) == before + 1
    assert replay.status == ForkStatus.COMPLETED and replay.run.status == "completed"
    report = determinism_report(replay)
    source = bodies(Run.objects.get(run_id=ex.run_id))
    request_seq = next(i + 1 for i, e in enumerate(source) if e.get("direction") == "request")
    assert report["firstDivergenceSeq"] == request_seq and report["score"] < 1
    notes = [e for e in bodies(replay.run) if DIVERGED_TAG in (e.get("tags") or [])]
    assert len(notes) == 1 and f'"divergencePoint":{request_seq}' in notes[0]["text"]
    answer = [e for e in bodies(replay.run) if e["type"] == "artifact_written"][-1]["artifact"]["data"]
    assert answer == {"text": "Echo: Ticket 43"}


def test_a_branch_with_another_model_and_prompt_asks_that_provider(
    workspace, sent, anthropic_fake, openai_fake
):
    ex = sent("sonnet", c.Session(prompt="Ticket 42"))
    sent_a, sent_o = len(anthropic_fake.requests), len(openai_fake.requests)

    branch = fork(
        workspace,
        ex.run_id,
        mode="branch",
        from_seq=2,  # the request: the step's start is fixed history
        overlay={"configurable": {"model": "llama-local", "prompt": "Ticket 44"}},
    )

    assert branch.status == ForkStatus.COMPLETED, branch.error_message
    assert (len(anthropic_fake.requests), len(openai_fake.requests)) == (sent_a, sent_o + 1)
    assert openai_fake.requests[-1]["messages"][-1]["content"] in (
        "Ticket 44",
        [{"type": "text", "text": "Ticket 44"}],
    )
    events = bodies(branch.run)
    model_io = [e for e in events if e["type"] == "model_io"]
    assert {e["provider"] for e in model_io} == {"openai"} and model_io[0]["model"] == "llama-local"
    assert any(e["direction"] == "stream_chunk" for e in model_io)  # the new answer's stream is recorded
    assert [e for e in events if e["type"] == "artifact_written"][-1]["artifact"]["data"] == {
        "text": "Echo: Ticket 44"
    }
    assert branch.run.status == "completed"
    # the same branch with the recorded prompt and model is a new invocation too (branches never reuse answers)
    again = fork(
        workspace, ex.run_id, mode="branch", from_seq=2, overlay={"configurable": {"prompt": "Ticket 42"}}
    )
    assert again.run.status == "completed" and len(anthropic_fake.requests) == sent_a + 1


@pytest.mark.parametrize(
    "configurable,path",
    [
        ({"temperature": 0.2}, "runOptionsOverlay.configurable"),
        ({"model": "no-such-model"}, "runOptionsOverlay.configurable.model"),
        ({"prompt": 42}, "runOptionsOverlay.configurable.prompt"),
    ],
)
def test_a_branch_the_playground_cannot_execute_is_refused_with_nothing_written(
    workspace, sent, configurable, path
):
    ex = sent("sonnet", c.Session(prompt="Hi"))
    runs = Run.objects.count()
    with pytest.raises(ActionError) as info:
        do_fork_with_history(
            workspace=workspace,
            source_run_id=ex.run_id,
            mode="branch",
            from_seq=1,
            overlay={"configurable": configurable},
        )
    assert info.value.code == "INVALID_INPUT" and info.value.path == path
    assert Run.objects.count() == runs


def test_a_fork_of_a_run_whose_execution_was_deleted_fails_with_a_code(workspace, sent, anthropic_fake):
    ex = sent("sonnet", c.Session(prompt="Hi"))
    pending = do_fork_with_history(workspace=workspace, source_run_id=ex.run_id, mode="replay")
    ex.delete()
    with pytest.raises(ActionError) as info:
        do_fork_with_history(workspace=workspace, source_run_id=ex.run_id, mode="replay")
    assert info.value.code == "REPLAY_DATA_EXPIRED"
    # a fork created before the deletion fails in the worker with the same code, without a provider call
    before = len(anthropic_fake.requests)
    failed = run_fork(pending.pk)
    assert failed.status == ForkStatus.FAILED and failed.error_code == "REPLAY_DATA_EXPIRED"
    assert failed.run.status == "failed" and len(anthropic_fake.requests) == before


@pytest.mark.parametrize("model", ["sonnet", "local"])
def test_the_provider_layer_plays_a_cached_answer_as_its_recorded_stream(
    workspace, sent, fake_models, anthropic_fake, openai_fake, model
):
    from runs.execution import model_calls as cached

    session = (
        c.set_thinking(c.Session(prompt="Stream it"), True) if model == "sonnet" else c.Session(prompt="Go")
    )
    ex = sent(model, session)
    pieces = [
        (e["payload"]["kind"], e["payload"]["text"])
        for e in bodies(Run.objects.get(run_id=ex.run_id))
        if e.get("direction") == "stream_chunk"
    ]
    before = requests_sent(anthropic_fake, openai_fake)
    deltas: list[tuple[str, str]] = []
    settings = fake_models[model].provider.provider_settings()
    record = cached.call(
        settings, ex.request_json, workspace=workspace, on_delta=lambda k, t: deltas.append((k, t))
    )
    assert record.hit and requests_sent(anthropic_fake, openai_fake) == before
    assert deltas == pieces and "".join(t for k, t in deltas if k == "text") == ex.response_text


def test_a_replay_that_asks_the_provider_prices_from_the_same_source_as_the_run(
    workspace, sent, anthropic_fake
):
    """One price source (the workspace's price book), not the model entry row: a new answer in a
    replay is priced like the execution it replays, and says so in payload["workbench.pricing"]."""
    ex = sent("sonnet", c.Session(prompt="Ticket 42"))
    request = ex.request_json
    request["messages"][-1]["content"] = [{"type": "text", "text": "Ticket 43"}]
    Execution.objects.filter(pk=ex.pk).update(request=dumps(request))  # not answerable from the cache

    replay = fork(workspace, ex.run_id, mode="replay")

    def response(run: Run) -> dict:
        return next(e for e in bodies(run) if e["type"] == "model_io" and e["direction"] == "response")

    source, new = response(Run.objects.get(run_id=ex.run_id)), response(replay.run)
    assert "usage" in new
    assert new["payload"]["workbench.pricing"]["source"] == source["payload"]["workbench.pricing"]["source"]
    assert new["cost"]["currency"] == source["cost"]["currency"]
