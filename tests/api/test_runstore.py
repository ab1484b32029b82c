"""The run store endpoints, compatible with the reference's HTTP run repository."""

from __future__ import annotations

import copy
import json

import pytest
from workbench_sdk.client import make_event

from runs.models import ArtifactVersion, Run


def _reference_bodies(conformance_dir):
    return sorted((conformance_dir / "expected").glob("*.runstore.json"))


def _body(path):
    return json.loads(path.read_text())["body"]


@pytest.fixture
def reference(conformance_dir):
    return _body(conformance_dir / "expected" / "linear_completed.runstore.json")


def _running_prefix(reference: dict, n: int) -> dict:
    """The reference state as it was after its first n events (still running)."""
    short = copy.deepcopy(reference)
    short["trace"] = reference["trace"][:n]
    short["revision"] = n
    short["run"]["status"] = "running"
    short["run"].pop("endedAt", None)
    written = {e["artifact"]["artifactKey"] for e in short["trace"] if e["type"] == "artifact_written"}
    short["artifactsByKey"] = [[k, a] for k, a in reference["artifactsByKey"] if k in written]
    return short


def test_every_reference_body_is_accepted_and_round_trips(api, conformance_dir):
    paths = _reference_bodies(conformance_dir)
    assert paths
    for path in paths:
        body = _body(path)
        run_id = body["run"]["id"]
        response = api.put(f"/api/runs/{run_id}", body)
        assert response.status_code == 201, (path.name, response.content)
        assert response.json()["lastSeq"] == len(body["trace"])
        got = api.get(f"/api/runs/{run_id}")
        assert got.status_code == 200
        assert got.json() == body, path.name  # what the reference client reads back is what it wrote
        assert got["ETag"] == f'"{body["revision"]}"'
        # Putting the same state again is a no-op, not a conflict.
        again = api.put(f"/api/runs/{run_id}", got.json(), headers={"If-Match": got["ETag"]})
        assert again.status_code == 200 and again.json()["seqs"] == []


def test_list_runs_newest_first_with_saved_run_meta(api, conformance_dir):
    bodies = [_body(p) for p in _reference_bodies(conformance_dir)]
    for body in bodies:
        assert api.put(f"/api/runs/{body['run']['id']}", body).status_code == 201
    listed = api.get("/api/runs").json()
    assert len(listed) == len(bodies)
    started = [m["startedAt"] for m in listed]
    assert started == sorted(started, reverse=True)
    by_id = {b["run"]["id"]: b["run"] for b in bodies}
    for meta in listed:
        run = by_id[meta["id"]]
        assert set(meta) <= {"id", "workflowId", "startedAt", "endedAt", "status", "tags"}
        assert meta["workflowId"] == run["workflowId"] and meta["status"] == run["status"]
        assert meta.get("endedAt") == run.get("endedAt") and meta.get("tags") == run.get("tags")
    assert len(api.get("/api/runs", limit=2).json()) == 2
    assert len(api.get("/api/runs", limit=0).json()) == 1  # clamped to 1..500
    assert len(api.get("/api/runs", limit=10_000).json()) == len(bodies)


def test_put_appends_the_new_suffix_through_the_engine(api, reference):
    run_id = reference["run"]["id"]
    short = _running_prefix(reference, 5)
    # The importer judges the first PUT like a bundle (its engine maps are taken as given).
    first = api.put(f"/api/runs/{run_id}", short)
    assert first.status_code == 201, first.content
    assert api.get(f"/api/runs/{run_id}")["ETag"] == '"5"'
    # The full reference state extends it: only the 8 new events are appended, by the engine.
    response = api.put(f"/api/runs/{run_id}", reference, headers={"If-Match": '"5"'})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["seqs"] == list(range(6, 14)) and body["status"] == "completed" and response["ETag"] == '"13"'
    state = api.get(f"/api/runs/{run_id}").json()
    assert state["trace"] == reference["trace"] and state["run"]["status"] == "completed"
    assert dict(state["stepStatus"]) == dict(reference["stepStatus"])
    late = make_event(run_id, "error", message="too late")
    refused = api.put(f"/api/runs/{run_id}", {**state, "trace": [*state["trace"], late]})
    assert refused.status_code == 409 and refused.json()["code"] == "INVALID_STATE_TRANSITION"
    # an annotation (a review after the fact) is the one event a finished run takes; it changes no state
    note = make_event(run_id, "annotation", text="reviewed later")
    taken = api.put(f"/api/runs/{run_id}", {**state, "trace": [*state["trace"], note]})
    assert taken.status_code == 200 and taken.json()["status"] == "completed", taken.content


def test_put_state_with_artifacts_ahead_of_its_trace(api, reference):
    """A first state whose artifacts are ahead of its trace, then the events that write them:
    the same versions are kept once; a version with other content is refused, never a 500."""
    run_id = reference["run"]["id"]
    short = _running_prefix(reference, 5)
    short["artifactsByKey"] = reference["artifactsByKey"]
    assert api.put(f"/api/runs/{run_id}", short).status_code == 201
    assert api.put(f"/api/runs/{run_id}", reference).status_code == 200
    keys = [key for key, _ in reference["artifactsByKey"]]
    stored = ArtifactVersion.objects.filter(run__run_id=run_id, key__in=keys)
    assert stored.count() == len(set(stored.values_list("key", "version")))

    other_id = run_id + "-b"
    tampered = copy.deepcopy(short)
    tampered["run"]["id"] = other_id
    for event in tampered["trace"]:
        event["runId"] = other_id
    for _, artifact in tampered["artifactsByKey"]:
        artifact["data"] = {"changed": True}
    assert api.put(f"/api/runs/{other_id}", tampered).status_code == 201
    full = copy.deepcopy(reference)
    full["run"]["id"] = other_id
    for event in full["trace"]:
        event["runId"] = other_id
    response = api.put(f"/api/runs/{other_id}", full)
    assert response.status_code == 409 and "other content" in response.json()["error"], response.json()


def test_put_non_prefix_trace_is_409(api, reference):
    run_id = reference["run"]["id"]
    assert api.put(f"/api/runs/{run_id}", reference).status_code == 201
    rewritten = copy.deepcopy(reference)
    rewritten["trace"][2]["ts"] = "2030-01-01T00:00:00.000Z"
    response = api.put(f"/api/runs/{run_id}", rewritten)
    assert response.status_code == 409 and response.json()["code"] == "CONFLICT"
    shorter = copy.deepcopy(reference)
    shorter["trace"] = shorter["trace"][:-1]
    response = api.put(f"/api/runs/{run_id}", shorter)
    assert response.status_code == 409 and response.json()["code"] == "CONFLICT"
    assert Run.objects.get(run_id=run_id).last_seq == len(reference["trace"])


def test_put_with_stale_if_match_is_412(api, reference):
    run_id = reference["run"]["id"]
    assert api.put(f"/api/runs/{run_id}", _running_prefix(reference, 4)).status_code == 201
    newer = _running_prefix(reference, 5)
    stale = api.put(f"/api/runs/{run_id}", newer, headers={"If-Match": '"3"'})
    assert stale.status_code == 412 and stale.json()["code"] == "PRECONDITION_FAILED"
    assert Run.objects.get(run_id=run_id).last_seq == 4
    assert (
        api.put(f"/api/runs/{run_id}", newer, headers={"If-Match": "garbage"}).json()["code"]
        == "INVALID_INPUT"
    )
    assert api.put(f"/api/runs/{run_id}", newer, headers={"If-Match": 'W/"4"'}).status_code == 200
    assert (
        api.put(f"/api/runs/{run_id}", _running_prefix(reference, 6), headers={"If-Match": "*"}).status_code
        == 200
    )
    # The reference client sends no If-Match: last writer wins only if it extends the stored trace.
    assert api.put(f"/api/runs/{run_id}", _running_prefix(reference, 7)).status_code == 200
    # If-Match on a run that does not exist yet: the precondition fails.
    missing = copy.deepcopy(reference)
    missing["run"]["id"] = "run_missing"
    for event in missing["trace"]:
        event["runId"] = "run_missing"
    assert api.put("/api/runs/run_missing", missing, headers={"If-Match": '"0"'}).status_code == 412


def test_put_with_mismatched_run_id_is_400(api, reference):
    response = api.put("/api/runs/another-id", reference)
    assert response.status_code == 400 and response.json()["code"] == "INVALID_RUN_STATE"
    assert not Run.objects.filter(run_id__in=["another-id", reference["run"]["id"]]).exists()


@pytest.mark.parametrize(
    "mutate, code",
    [
        (lambda b: b.pop("run"), "INVALID_RUN_STATE"),
        (lambda b: b["trace"].append({"id": "e", "type": "step_started"}), None),
        (lambda b: b["run"].__setitem__("status", "exploded"), None),
    ],
)
def test_put_invalid_state_is_400_and_stores_nothing(api, reference, mutate, code):
    body = copy.deepcopy(reference)
    run_id = body["run"]["id"]
    mutate(body)
    response = api.put(f"/api/runs/{run_id}", body)
    assert response.status_code == 400, response.content
    assert response.json()["code"] == (code or response.json()["code"]) and response.json()["code"]
    assert not Run.objects.filter(run_id=run_id).exists()
    assert api.put(f"/api/runs/{run_id}", raw=b"[not json").json()["code"] == "INVALID_JSON"
    assert api.put(f"/api/runs/{run_id}", raw=b"").json()["code"] == "INVALID_RUN_STATE"


def test_get_and_delete(api, reference):
    run_id = reference["run"]["id"]
    assert api.get(f"/api/runs/{run_id}").status_code == 404
    assert api.put(f"/api/runs/{run_id}", reference).status_code == 201
    assert api.delete(f"/api/runs/{run_id}").status_code == 204
    missing = api.get(f"/api/runs/{run_id}")
    assert missing.status_code == 404 and missing.json()["code"] == "UNKNOWN_RUN"
    assert api.delete(f"/api/runs/{run_id}").status_code == 404


def test_run_started_through_commands_reads_as_runstore(api, started_run):
    api.post(
        f"/api/runs/{started_run}/events",
        {"events": [make_event(started_run, "step_started", stepId="parse")]},
    )
    state = api.get(f"/api/runs/{started_run}").json()
    assert state["revision"] == 1 and len(state["trace"]) == 1
    assert dict(state["stepStatus"])["parse"] == "running"
    assert set(state) == {
        "revision",
        "run",
        "trace",
        "artifactsByKey",
        "ruleSetsById",
        "stepStatus",
        "gateState",
        "idempotency",
    }
