"""POST /api/runs/{runId}:fork, the determinism report and the cache lookup over REST."""

from __future__ import annotations

import pytest

from runs.models import Event, Run, RunFork


def recorded_call(run_id: str, prompt: str = "hi", answer: str = "hello") -> list[dict]:
    """A step with one model call (request and response with correlation id c1), as a host appends it."""
    events = [
        {"type": "step_started", "stepId": "parse"},
        {
            "type": "model_io",
            "stepId": "parse",
            "direction": "request",
            "provider": "openai",
            "model": "m",
            "correlationId": "c1",
            "payload": {"messages": [{"role": "user", "content": prompt}]},
        },
        {
            "type": "model_io",
            "stepId": "parse",
            "direction": "response",
            "provider": "openai",
            "model": "m",
            "correlationId": "c1",
            "payload": {"text": answer},
            "usage": {"inputTokens": 1, "outputTokens": 1},
        },
        {"type": "step_completed", "stepId": "parse", "ok": True},
    ]
    for i, e in enumerate(events):
        e.update({"id": f"e{i}", "runId": run_id, "ts": f"2026-01-01T00:00:0{i}.000Z"})
    return events


@pytest.fixture
def source(api, started_run) -> str:
    assert (
        api.post(f"/api/runs/{started_run}/events", {"events": recorded_call(started_run)}).status_code == 200
    )
    return started_run


def fork_url(run_id: str) -> str:
    return f"/api/runs/{run_id}:fork"


@pytest.mark.django_db
def test_replay_fork_copies_history_and_records_lineage(api, source):
    response = api.post(fork_url(source), {"mode": "replay", "fromSeq": 3})
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["sourceRunId"] == source and body["fromSeq"] == 3 and body["mode"] == "replay"
    assert body["status"] == "external"  # no step code registered: the host drives it
    assert body["eventsUrl"] == f"/api/runs/{body['runId']}/events"
    child = Run.objects.get(run_id=body["runId"])
    events = [e.data for e in Event.objects.filter(run=child).order_by("seq")]
    assert [e["id"] for e in events[:2]] == ["e0", "e1"]
    assert all(e["runId"] == child.run_id for e in events)
    assert events[2]["type"] == "run_forked" and events[2]["parentRunId"] == source
    assert child.run_doc["context"]["parentRunId"] == source
    assert Run.objects.get(run_id=source).last_seq == 4
    # the host re-executes through the API; the write path compares with the source
    replayed = [
        {
            "id": "x1",
            "runId": child.run_id,
            "ts": "2026-02-01T00:00:00.000Z",
            "type": "model_io",
            "stepId": "parse",
            "direction": "response",
            "provider": "openai",
            "model": "m",
            "correlationId": "c1",
            "payload": {"text": "hello"},
            "usage": {"inputTokens": 1, "outputTokens": 1},
        },
        {
            "id": "x2",
            "runId": child.run_id,
            "ts": "2026-02-01T00:00:01.000Z",
            "type": "step_completed",
            "stepId": "parse",
            "ok": False,
        },
    ]
    assert api.post(f"/api/runs/{child.run_id}/events", {"events": replayed}).status_code == 200
    report = api.get(f"/api/runs/{child.run_id}/determinism").json()
    assert report["matchedEvents"] == 1 and report["comparedEvents"] == 2
    assert report["firstDivergenceSeq"] == 4 and report["score"] == 0.5


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"mode": "rewind"}, 400, "INVALID_INPUT"),
        ({}, 400, "INVALID_INPUT"),
        ({"mode": "branch"}, 400, "INVALID_INPUT"),
        ({"mode": "replay", "runOptionsOverlay": {"tags": ["x"]}}, 400, "INVALID_INPUT"),
        ({"mode": "replay", "fromSeq": -1}, 400, "INVALID_INPUT"),
        ({"mode": "replay", "fromSeq": "2"}, 400, "INVALID_INPUT"),
        ({"mode": "branch", "fromSeq": 1, "runOptionsOverlay": {"nope": 1}}, 400, "INVALID_INPUT"),
        (
            {"mode": "branch", "fromSeq": 1, "runOptionsOverlay": {"gateDecisions": {"review": "maybe"}}},
            400,
            "INVALID_INPUT",
        ),
        ({"mode": "replay", "fromSeq": 99}, 422, "SEQ_OUT_OF_RANGE"),
        ({"mode": "replay", "extra": 1}, 400, "INVALID_INPUT"),
    ],
)
def test_bad_requests_change_nothing(api, source, body, status, code):
    before = Run.objects.count()
    response = api.post(fork_url(source), body)
    assert response.status_code == status, response.content
    assert response.json()["code"] == code
    assert Run.objects.count() == before


@pytest.mark.django_db
def test_outsiders_get_404_and_read_only_tokens_cannot_fork(outsider, reader, api, source):
    missing = api.post(fork_url("run_missing"), {"mode": "replay"})
    foreign = outsider.post(fork_url(source), {"mode": "replay"})
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json() == {**missing.json(), "error": foreign.json()["error"]}
    assert reader.post(fork_url(source), {"mode": "replay"}).status_code == 403
    assert outsider.get(f"/api/runs/{source}/determinism").status_code == 404
    assert RunFork.objects.count() == 0


@pytest.mark.django_db
def test_idempotency_key_returns_the_first_fork(api, source):
    headers = {"Idempotency-Key": "fork-1"}
    first = api.post(fork_url(source), {"mode": "replay"}, headers=headers)
    again = api.post(fork_url(source), {"mode": "replay"}, headers=headers)
    assert first.status_code == again.status_code == 201
    assert first.json()["runId"] == again.json()["runId"]
    assert RunFork.objects.count() == 1


@pytest.mark.django_db
def test_in_flight_duplicate_is_409(api, source, workspace):
    from accounts import idempotency

    # the first request has reserved the key and is still running
    url = f"/api/runs/{source}:fork"
    body = b'{"mode":"replay"}'
    idempotency.begin(
        workspace=workspace, key="fork-2", fingerprint=idempotency.fingerprint("POST", url, body)
    )
    response = api.post(url, raw=body, headers={"Idempotency-Key": "fork-2"})
    assert response.status_code == 409
    assert RunFork.objects.count() == 0


@pytest.mark.django_db
def test_branch_is_not_a_replay_report(api, source):
    created = api.post(
        fork_url(source), {"mode": "branch", "fromSeq": 2, "runOptionsOverlay": {"tags": ["wi"]}}
    )
    assert created.status_code == 201
    run_id = created.json()["runId"]
    assert "wi" in Run.objects.get(run_id=run_id).tags
    assert api.get(f"/api/runs/{run_id}/determinism").status_code == 409


@pytest.mark.django_db
def test_cache_lookup_is_per_workspace(api, outsider, source):
    from runs.models import CachedResponse

    entry = CachedResponse.objects.get()
    found = api.get(f"/api/cache/{entry.key}")
    assert found.status_code == 200
    assert found.json()["response"]["payload"] == {"text": "hello"}
    assert api.get(f"/api/cache/{entry.key_v1}", recipe="v1").status_code == 200
    assert outsider.get(f"/api/cache/{entry.key}").status_code == 404
    assert api.get("/api/cache/nothex").status_code == 400


@pytest.mark.django_db
def test_cache_lookup_of_a_row_of_another_shape_answers_not_500(api, source):
    """A row not written by the recorder (an import of another tool's cache, a fixture) is
    answered as it is stored, never with a 500 (issue 54)."""
    from runs.models import CachedResponse

    entry = CachedResponse.objects.get()
    CachedResponse.objects.filter(pk=entry.pk).update(response='{"text": "raw"}')
    found = api.get(f"/api/cache/{entry.key}")
    assert found.status_code == 200, found.content
    assert found.json()["response"] is None and found.json()["chunks"] == []
    CachedResponse.objects.filter(pk=entry.pk).update(response='["a list"]')
    found = api.get(f"/api/cache/{entry.key}")
    assert found.status_code == 200 and found.json()["response"] == ["a list"]
