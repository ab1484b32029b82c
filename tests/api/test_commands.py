"""Fine-grained commands: start, append, resolve gate, write/patch artifact, annotate, cancel, events."""

from __future__ import annotations

from workbench_sdk.client import make_event

from runs.models import Event, Run

DESCRIBED_BY = '</api/openapi.json>; rel="describedby"'


def _ok(response, status=200):
    assert response.status_code == status, response.content
    assert response["Link"] == DESCRIBED_BY
    return response.json()


def test_start_run(api, workflow):
    body = _ok(api.post("/api/runs", {"workflow": workflow, "runId": "run_x", "tags": ["a"]}), 201)
    assert body == {
        "runId": "run_x",
        "revision": 0,
        "status": "running",
        "lastSeq": 0,
        "seqs": [],
        "created": True,
    }
    run = Run.objects.get(run_id="run_x")
    assert run.tags == ["a"] and run.created_by.startswith("token:")


def test_start_run_with_invalid_workflow_is_400_with_code(api, workflow):
    workflow["edges"].append({"id": "loop", "from": "publish", "to": "parse"})
    body = _ok(api.post("/api/runs", {"workflow": workflow}), 400)
    assert body["code"] == "INVALID_WORKFLOW" and body["error"]


def test_start_run_id_collision_is_409(api, started_run, workflow):
    assert (
        _ok(api.post("/api/runs", {"workflow": workflow, "runId": started_run}), 409)["code"]
        == "RUN_ID_COLLISION"
    )


def test_append_events_returns_seqs_and_revision(api, started_run):
    events = [
        make_event(started_run, "step_started", stepId="parse"),
        make_event(started_run, "annotation", text="hi"),
    ]
    body = _ok(api.post(f"/api/runs/{started_run}/events", {"events": events}))
    assert body["seqs"] == [1, 2] and body["lastSeq"] == 2 and body["revision"] == 2
    stored = list(
        Event.objects.filter(run__run_id=started_run).order_by("seq").values_list("event_id", "actor")
    )
    assert [e for e, _ in stored] == [events[0]["id"], events[1]["id"]]
    assert all(actor.startswith("token:") for _, actor in stored)


def test_append_events_is_validated_by_the_engine(api, started_run):
    bad_type = [make_event(started_run, "no_such_type")]
    assert (
        _ok(api.post(f"/api/runs/{started_run}/events", {"events": bad_type}), 400)["code"]
        == "INVALID_TRACE_EVENT"
    )
    unknown_step = [make_event(started_run, "step_started", stepId="nope")]
    code = _ok(api.post(f"/api/runs/{started_run}/events", {"events": unknown_step}), 400)["code"]
    assert code in ("UNKNOWN_STEP", "INVALID_TRACE_EVENT")
    assert Run.objects.get(run_id=started_run).last_seq == 0  # nothing of a refused batch lands


def test_bad_bodies_are_400_with_code(api, started_run):
    assert _ok(api.post(f"/api/runs/{started_run}/events", {"events": []}), 400)["code"] == "INVALID_INPUT"
    assert _ok(api.post(f"/api/runs/{started_run}/events", raw=b"{not json"), 400)["code"] == "INVALID_JSON"
    assert _ok(api.post(f"/api/runs/{started_run}/events", [1, 2]), 400)["code"] == "INVALID_INPUT"
    body = _ok(api.post(f"/api/runs/{started_run}/gates/resolve", {"stepId": "review", "gate": "NOPE"}), 400)
    assert body["code"] == "INVALID_INPUT" and "gate" in body["error"]


def _gate_flow(api, run_id):
    events = [
        make_event(run_id, "step_started", stepId="parse"),
        make_event(run_id, "step_completed", stepId="parse", ok=True),
    ]
    _ok(api.post(f"/api/runs/{run_id}/events", {"events": events}))


def test_resolve_gate(api, reviewer, started_run):
    _gate_flow(api, started_run)
    body = _ok(
        reviewer.post(
            f"/api/runs/{started_run}/gates/resolve",
            {"stepId": "review", "gate": "PAUSE_BEFORE", "decision": "approved", "note": "fine"},
        )
    )
    assert body["seqs"] and body["lastSeq"] == body["seqs"][-1]
    last = Event.objects.filter(run__run_id=started_run).order_by("-seq").first()
    assert last.type == "human_gate_resolved" and last.data["decision"] == "approved"
    # Resolving again is an invalid transition (409), not a server error.
    again = reviewer.post(
        f"/api/runs/{started_run}/gates/resolve",
        {"stepId": "review", "gate": "PAUSE_BEFORE", "decision": "approved"},
    )
    assert again.status_code in (400, 409) and again.json()["code"]


def test_write_and_patch_artifact(api, started_run):
    body = _ok(
        api.post(
            f"/api/runs/{started_run}/artifacts", {"artifactKey": "notes", "typeId": "json", "data": {"a": 1}}
        )
    )
    assert len(body["seqs"]) == 1
    body = _ok(
        api.post(
            f"/api/runs/{started_run}/artifacts/notes/patch",
            {"fromVersion": 1, "patch": [{"op": "replace", "path": "/a", "value": 2}]},
        )
    )
    last = Event.objects.filter(run__run_id=started_run).order_by("-seq").first()
    assert last.type == "artifact_patch" and last.data["toVersion"] == 2
    stale = api.post(
        f"/api/runs/{started_run}/artifacts/notes/patch",
        {"fromVersion": 1, "patch": [{"op": "replace", "path": "/a", "value": 3}]},
    )
    assert stale.status_code in (400, 409) and stale.json()["code"]
    bad = api.post(
        f"/api/runs/{started_run}/artifacts/notes/patch",
        {"fromVersion": 2, "patch": [{"op": "remove", "path": "/zz"}]},
    )
    assert bad.status_code in (400, 409) and bad.json()["code"] == "PATCH_FAILED"


def test_annotate_and_cancel(api, started_run):
    body = _ok(api.post(f"/api/runs/{started_run}/annotations", {"text": "look here", "tags": ["x"]}))
    assert body["seqs"] == [1]
    body = _ok(api.post(f"/api/runs/{started_run}/cancel", {"reason": "enough"}))
    assert body["status"] == "cancelled" and body["cancelled"] == [started_run] and body["seqs"]
    again = api.post(f"/api/runs/{started_run}/cancel", {})
    assert again.status_code == 409 and again.json()["code"] == "INVALID_STATE_TRANSITION"
    cascade = _ok(api.post(f"/api/runs/{started_run}/cancel", {"cascade": True}))
    assert cascade["cancelled"] == [] and cascade["skipped"][0][0] == started_run


def test_events_paging(api, started_run):
    events = [make_event(started_run, "annotation", text=f"n{i}") for i in range(5)]
    _ok(api.post(f"/api/runs/{started_run}/events", {"events": events}))
    page = _ok(api.get(f"/api/runs/{started_run}/events", after_seq=1, limit=2))
    assert [item["seq"] for item in page["events"]] == [2, 3]
    assert [item["event"]["text"] for item in page["events"]] == ["n1", "n2"]
    assert page["hasMore"] and page["nextAfterSeq"] == 3 and page["lastSeq"] == 5
    tail = _ok(api.get(f"/api/runs/{started_run}/events", after_seq=3))
    assert [item["seq"] for item in tail["events"]] == [4, 5] and not tail["hasMore"]
    assert _ok(api.get(f"/api/runs/{started_run}/events", after_seq=99))["events"] == []
    assert _ok(api.get(f"/api/runs/{started_run}/events", limit=0), 400)["code"] == "INVALID_INPUT"


def test_idempotency_key_replays_first_result(api, started_run):
    headers = {"Idempotency-Key": "k-1"}
    event = make_event(started_run, "annotation", text="once")
    first = api.post(f"/api/runs/{started_run}/events", {"events": [event]}, headers=headers)
    second = api.post(f"/api/runs/{started_run}/events", {"events": [event]}, headers=headers)
    assert first.status_code == second.status_code == 200
    assert first.content == second.content and second["Idempotent-Replayed"] == "true"
    assert Run.objects.get(run_id=started_run).last_seq == 1
    # The same key for a different request is refused.
    other = api.post(f"/api/runs/{started_run}/annotations", {"text": "x"}, headers=headers)
    assert other.status_code == 409 and other.json()["code"] == "IDEMPOTENCY_CONFLICT"
    # Errors are replayed too (a retry sees the same answer).
    bad = {"Idempotency-Key": "k-2"}
    r1 = api.post(f"/api/runs/{started_run}/cancel", {}, headers=bad)
    r2 = api.post(f"/api/runs/{started_run}/cancel", {}, headers=bad)
    assert r1.status_code == r2.status_code == 200 and r1.content == r2.content


def test_idempotency_keys_are_per_workspace(api, outsider, started_run, workflow):
    headers = {"Idempotency-Key": "shared"}
    a = api.post("/api/runs", {"workflow": workflow}, headers=headers)
    b = outsider.post("/api/runs", {"workflow": workflow}, headers=headers)
    assert a.status_code == b.status_code == 201 and a.json()["runId"] != b.json()["runId"]
