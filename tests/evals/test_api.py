"""REST for datasets and experiments: the issue's shapes, 404 for another workspace's, codes for
bad input, and the experiment driven end to end through the API."""

from __future__ import annotations

import pytest

from evals.models import Experiment
from evals.runner import run_experiment
from tests.api.conftest import BearerClient


def _token(workspace, scopes, name):
    from accounts.tokens import create_token

    return create_token(workspace=workspace, name=name, scopes=scopes).secret


@pytest.fixture
def api(workspace):
    return BearerClient(_token(workspace, ["read", "write", "review"], "full"))


@pytest.fixture
def reader(workspace):
    return BearerClient(_token(workspace, ["read"], "reader"))


@pytest.fixture
def outsider(other_workspace):
    return BearerClient(_token(other_workspace, ["read", "write", "review"], "outsider"))


@pytest.mark.django_db
def test_dataset_items_from_gates_and_as_of(api, reader, outsider, recorded):
    created = api.post("/api/datasets", {"name": "draft replies", "description": "decided drafts"})
    assert created.status_code == 201, created.content
    ds = created.json()["id"]
    assert created.json()["revision"] == 0
    assert api.post("/api/datasets", {"name": "draft replies"}).json()["code"] == "CONFLICT"
    added = api.post(f"/api/datasets/{ds}/items", {"fromGates": {"stepId": "draft"}})
    assert added.status_code == 200, added.content
    assert added.json() == {"added": 3, "revision": 1}
    assert api.post(f"/api/datasets/{ds}/items", {"fromGates": {"stepId": "draft"}}).json() == {
        "added": 0,
        "revision": 1,
    }
    listed = reader.get(f"/api/datasets/{ds}/items")
    assert listed.status_code == 200
    items = listed.json()["items"]
    assert len(items) == 3 and {i["label"] for i in items} == {"approved"}
    assert all(set(i["source"]) == {"runId", "eventId", "seq"} for i in items)
    assert reader.get(f"/api/datasets/{ds}/items", asOf="0").json()["items"] == []
    assert reader.get(f"/api/datasets/{ds}/items", asOf="2000-01-01T00:00:00Z").json()["items"] == []
    frozen = reader.get(f"/api/datasets/{ds}/items", asOf="1").content
    api.post(f"/api/datasets/{ds}/items", {"items": [{"input": {"q": 1}, "expected": "x"}]})
    api.post(f"/api/datasets/{ds}/items:delete", {"itemIds": [items[0]["id"]]})
    assert reader.get(f"/api/datasets/{ds}/items", asOf="1").content == frozen  # byte for byte
    assert len(reader.get(f"/api/datasets/{ds}/items").json()["items"]) == 3
    # an outsider: exactly like a missing one
    theirs = outsider.get(f"/api/datasets/{ds}/items")
    missing = outsider.get("/api/datasets/ds_missing/items")
    assert theirs.status_code == missing.status_code == 404
    assert outsider.post(f"/api/datasets/{ds}/items", {"items": [{"input": 1}]}).status_code == 404
    # a reader cannot write
    assert reader.post(f"/api/datasets/{ds}/items", {"items": [{"input": 1}]}).status_code == 403


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body",
    [
        {},
        {"items": "x"},
        {"items": [{"expected": 1}]},
        {"items": [], "fromGates": {"stepId": "x"}},
        {"fromRuns": {"runIds": ["run_nope"]}},
        {"fromGates": {"stepId": ""}},
        {"fromGates": {"stepId": "draft", "limit": 0}},
        {"fromEvent": {"runId": "run_nope", "seq": 1}},
        {"nope": 1},
    ],
)
def test_bad_item_requests_are_4xx_with_a_code_and_change_nothing(api, body):
    ds = api.post("/api/datasets", {"name": "d"}).json()["id"]
    response = api.post(f"/api/datasets/{ds}/items", body)
    assert 400 <= response.status_code < 500, response.content
    assert response.json()["code"]
    assert api.get(f"/api/datasets/{ds}").json()["revision"] == 0


@pytest.mark.django_db
def test_experiment_through_the_api(api, gate_dataset, fake, settings):
    before = len(fake.requests)
    response = api.post(
        "/api/experiments", {"datasetId": gate_dataset.public_id, "name": "replay", "change": {}}
    )
    assert response.status_code == 201, response.content
    exp = response.json()["id"]
    assert response.json()["status"] == "pending"
    run_experiment(Experiment.objects.get(public_id=exp).pk)  # what the task does
    got = api.get(f"/api/experiments/{exp}").json()
    assert got["status"] == "completed"
    assert got["summary"]["providerCalls"] == 0 and len(fake.requests) == before
    assert got["summary"]["meanScore"]["mean"] == 1.0
    assert {
        "itemId",
        "runId",
        "score",
        "providerCalls",
        "cacheHits",
        "costDelta",
        "firstDivergenceSeq",
    } <= set(got["items"][0])
    rescored = api.post(
        f"/api/experiments/{exp}/rescore", {"evaluator": {"kind": "jsonpath", "paths": ["$.text"]}}
    )
    assert rescored.status_code == 200 and rescored.json()["rescored"] == 1
    assert len(fake.requests) == before
    bad = api.post(
        "/api/experiments", {"datasetId": gate_dataset.public_id, "name": "x", "change": {"nope": 1}}
    )
    assert bad.status_code == 400 and bad.json()["code"] == "INVALID_INPUT"
    unknown = api.post(
        "/api/experiments",
        {"datasetId": gate_dataset.public_id, "name": "x", "change": {"prompt": {"name": "p", "version": 1}}},
    )
    assert unknown.status_code == 400 and unknown.json()["code"] == "INVALID_INPUT"
    assert "no version 1" in unknown.content.decode()
    assert api.post("/api/experiments", {"datasetId": "ds_nope", "name": "x"}).status_code == 404


@pytest.mark.django_db
def test_openapi_lists_the_routes(api):
    paths = api.get("/api/openapi.json").json()["paths"]
    for path in (
        "/api/datasets",
        "/api/datasets/{dataset_id}/items",
        "/api/experiments/{experiment_id}/rescore",
    ):
        assert path in paths
