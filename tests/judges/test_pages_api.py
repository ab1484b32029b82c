"""The judges' pages and REST: owners attach judges and set policies, reviewers and viewers read,
bad input answers a code and changes nothing."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from accounts.tokens import create_token
from judges.models import GateJudge

pytestmark = pytest.mark.django_db


def _client(user):
    client = Client()
    client.force_login(user)
    return client


FORM = {
    "name": "triage", "kind": "llm", "workflow_id": "wf-demo", "step_id": "review", "gate": "PAUSE_BEFORE",
    "provider": "anthropic", "model": "claude-haiku-4-5", "prompt": "judges/review-gate", "prompt_version": "1",
    "budget": "2.50",
}  # fmt: skip


def test_an_owner_attaches_a_judge_and_sets_its_policy_on_the_page(alice, judge_prompt):
    client = _client(alice)
    response = client.post("/judges/", FORM)
    judge = GateJudge.objects.get(name="triage")
    assert response.status_code == 302 and response["Location"] == f"/judges/{judge.judge_id}/"
    assert judge.config["promptVersion"] == 1 and str(judge.budget) == "2.500000"
    page = client.get(f"/judges/{judge.judge_id}/").content.decode()
    assert "Judge triage@1" in page and "Delegation is not earned: 0 human-decided items" in page

    refused = client.post(f"/judges/{judge.judge_id}/policy/", {"kappa_floor": "0.5", "enabled": "on"})
    assert refused.status_code == 400 and "FLOOR_TOO_LOW" in refused.content.decode()
    refused = client.post(f"/judges/{judge.judge_id}/policy/", {"delegation": "approve", "enabled": "on"})
    assert refused.status_code == 400 and "DELEGATION_NOT_EARNED" in refused.content.decode()
    judge.refresh_from_db()
    assert (judge.delegation, judge.kappa_floor) == ("off", 0.8)

    # reviewers see proposals before they decide only once the judge is calibrated
    refused = client.post(
        f"/judges/{judge.judge_id}/policy/", {"show_to_reviewers": "on", "enabled": "on", "budget": ""}
    )
    assert refused.status_code == 400 and "JUDGE_NOT_CALIBRATED" in refused.content.decode()
    judge.refresh_from_db()
    assert not judge.show_to_reviewers

    saved = client.post(
        f"/judges/{judge.judge_id}/policy/",
        {"kappa_floor": "0.85", "audit_percent": "20", "enabled": "on", "budget": ""},
    )
    assert saved.status_code == 302
    judge.refresh_from_db()
    assert (judge.kappa_floor, judge.audit_percent, judge.show_to_reviewers, judge.budget) == (
        0.85,
        20,
        False,
        None,
    )

    again = client.post("/judges/", {**FORM, "prompt": "missing"})
    assert again.status_code == 400 and "PROMPT_NOT_FOUND" in again.content.decode()
    assert GateJudge.objects.count() == 1


def test_reviewers_and_viewers_read_but_do_not_manage(bob, vera, judge):
    for user in (bob, vera):
        client = _client(user)
        assert client.get("/judges/").status_code == 200
        assert client.get(f"/judges/{judge.judge_id}/").status_code == 200
        assert client.post("/judges/", FORM).status_code == 403
        assert client.post(f"/judges/{judge.judge_id}/policy/", {"delegation": "both"}).status_code == 403
    assert GateJudge.objects.count() == 1


def test_rest_attach_read_and_refuse(workspace, alice, judge_prompt):
    client = _client(alice)
    body = {
        "name": "triage", "kind": "llm", "workflowId": "wf-demo", "stepId": "review", "gate": "PAUSE_BEFORE",
        "config": {"provider": "anthropic", "model": "claude-haiku-4-5", "prompt": "judges/review-gate", "promptVersion": 1},
    }  # fmt: skip
    created = client.post("/api/judges", json.dumps(body), content_type="application/json")
    assert created.status_code == 201, created.content
    doc = created.json()
    assert doc["version"] == 1 and doc["policy"]["delegation"] == "off" and doc["policy"]["kappaFloor"] == 0.8
    second = client.post("/api/judges", json.dumps(body), content_type="application/json").json()
    assert second["version"] == 2
    listed = client.get("/api/judges").json()
    assert {(j["name"], j["version"], j["enabled"]) for j in listed} == {
        ("triage", 1, False),
        ("triage", 2, True),
    }

    for bad, code in (
        ({**body, "gate": "LATER"}, "INVALID_INPUT"),
        ({**body, "config": {**body["config"], "promptVersion": 9}}, "PROMPT_NOT_FOUND"),
    ):
        response = client.post("/api/judges", json.dumps(bad), content_type="application/json")
        assert response.status_code == 400 and response.json()["code"] == code
    response = client.post("/api/judges", b"[]", content_type="application/json")
    assert response.status_code == 400 and response.json()["code"] == "INVALID_INPUT"
    response = client.put(
        f"/api/judges/{doc['id']}/policy", json.dumps({"kappaFloor": 0.59}), content_type="application/json"
    )
    assert response.status_code == 400 and response.json()["code"] == "FLOOR_TOO_LOW"
    response = client.put(
        f"/api/judges/{doc['id']}/policy", json.dumps({"nope": 1}), content_type="application/json"
    )
    assert response.status_code == 400 and response.json()["code"] == "INVALID_INPUT"
    assert GateJudge.objects.count() == 2

    token = create_token(workspace=workspace, name="reader", scopes=["read"])
    reader = Client(headers={"Authorization": f"Bearer {token.secret}"})
    assert reader.get("/api/judges").status_code == 200
    assert reader.post("/api/judges", json.dumps(body), content_type="application/json").status_code == 403
