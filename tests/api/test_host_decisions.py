"""A host's appended ``human_gate_resolved`` on a gate already waiting on the run is a decision
like a reviewer's (runs.actions.gatepolicy.do_append_host_events): a token that may only write
(the pipeline the gate holds) cannot decide it (403 FORBIDDEN, nothing written); a reviewer's
token can, except where the gate's policy counts votes (409 VOTES_REQUIRED: each voter decides
through /gates/resolve) or keeps the run's starter from approving (403 SEPARATION_OF_DUTIES). A
request and its decision appended together stay the host's own record (nobody asked: as before),
through ``POST /events`` and the run store's PUT alike."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.tokens import create_token
from runs import actions
from runs.actions.gatepolicy import do_set_gate_policy
from runs.models import Event, Run
from tests.judges.conftest import waiting_run

pytestmark = pytest.mark.django_db

TS = "2026-12-05T00:00:00.000Z"


def _api(workspace, *scopes, user=None) -> tuple[Client, str]:
    token = create_token(workspace=workspace, name="host", scopes=["read", *scopes], created_by=user)
    return Client(headers={"Authorization": f"Bearer {token.secret}"}), token.token.actor


def _decision(run_id: str, n: int = 1, decision: str = "approved") -> dict:
    return {
        "id": f"evt_d{n}",
        "runId": run_id,
        "ts": TS,
        "type": "human_gate_resolved",
        "stepId": "review",
        "gate": "PAUSE_BEFORE",
        "decision": decision,
    }


def _append(api, run_id: str, events: list[dict]):
    return api.post(f"/api/runs/{run_id}/events", {"events": events}, content_type="application/json")


def _waiting(run_id: str) -> bool:
    return Run.objects.get(run_id=run_id).pending_gates == 1


def test_a_write_only_token_cannot_decide_a_waiting_gate(workspace, workflow):
    waiting_run(workspace, workflow, "run_r")
    api, _ = _api(workspace, "write")
    before = Run.objects.get(run_id="run_r").last_seq
    answer = _append(api, "run_r", [_decision("run_r", decision=d) for d in ("approved",)])
    assert answer.status_code == 403 and answer.json()["code"] == "FORBIDDEN"
    assert "needs the review scope" in answer.json()["error"]
    assert _waiting("run_r") and Run.objects.get(run_id="run_r").last_seq == before
    rejected = _append(api, "run_r", [_decision("run_r", 2, "rejected")])
    assert rejected.status_code == 403 and _waiting("run_r")


def test_a_reviewers_token_decides_it_under_the_gates_policy(workspace, workflow, bob):
    waiting_run(workspace, workflow, "run_r")
    api, actor = _api(workspace, "write", "review", user=bob)
    do_set_gate_policy(workspace=workspace, policy={"quorum": 2})
    answer = _append(api, "run_r", [_decision("run_r")])
    assert answer.status_code == 409 and answer.json()["code"] == "VOTES_REQUIRED"
    assert "/gates/resolve" in answer.json()["error"] and _waiting("run_r")
    do_set_gate_policy(workspace=workspace, policy={"separationOfDuties": True})
    Run.objects.filter(run_id="run_r").update(created_by=actor)
    starter = _append(api, "run_r", [_decision("run_r")])
    assert starter.status_code == 403 and starter.json()["code"] == "SEPARATION_OF_DUTIES"
    do_set_gate_policy(workspace=workspace, policy={})
    decided = _append(api, "run_r", [_decision("run_r")])
    assert decided.status_code == 200 and not _waiting("run_r")
    assert Event.objects.get(run__run_id="run_r", type="human_gate_resolved").actor == actor


def test_nobody_asked_a_request_and_its_decision_together_are_the_hosts_record(workspace, workflow):
    waiting_run(workspace, workflow, "run_r")
    actions.do_start_run(workspace=workspace, workflow=workflow, run_id="run_h", actor="t")
    api, _ = _api(workspace, "write")
    base = {"runId": "run_h", "ts": TS, "stepId": "parse"}
    recorded = _append(  # review's PAUSE_BEFORE opens and is decided within the one batch
        api,
        "run_h",
        [
            {**base, "id": "evt_s", "type": "step_started"},
            {**base, "id": "evt_c", "type": "step_completed", "ok": True},
            {**_decision("run_h"), "id": "evt_d"},
        ],
    )
    assert recorded.status_code == 200, recorded.content  # a gate the host decided itself
    assert Event.objects.filter(run__run_id="run_h", type="human_gate_resolved").exists()
    assert _waiting("run_r")  # the other run's gate still waits for a reviewer


def test_the_run_stores_put_cannot_decide_a_waiting_gate_with_a_write_only_token(workspace, workflow):
    waiting_run(workspace, workflow, "run_r")
    reader, _ = _api(workspace)
    state = reader.get("/api/runs/run_r").json()
    state["trace"].append(_decision("run_r"))
    api, _ = _api(workspace, "write")
    answer = api.put("/api/runs/run_r", state, content_type="application/json")
    assert answer.status_code == 403 and answer.json()["code"] == "FORBIDDEN" and _waiting("run_r")
