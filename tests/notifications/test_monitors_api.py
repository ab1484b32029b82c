"""Monitors over REST (/api/monitors) and on their page (/monitors/); the other metrics read from
the rollups the write path keeps (errors, decisions, gates waiting)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from runs import actions
from runs.actions.monitors import do_create_monitor, evaluate_monitors
from runs.engine import commands as c
from runs.models import Monitor
from tests.api.conftest import BearerClient
from tests.notifications.conftest import bring_review_gate

pytestmark = pytest.mark.django_db


def _client(workspace, scopes=("read", "manage")) -> BearerClient:
    from accounts.tokens import create_token

    return BearerClient(create_token(workspace=workspace, name="m", scopes=list(scopes)).secret)


def test_create_list_update_delete(workspace):
    api = _client(workspace)
    created = api.post(
        "/api/monitors", {"name": "Spend", "metric": "cost_hour", "warning": 2, "alert": 5, "model": "gpt-x"}
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["id"].startswith("mon_") and body["state"] == "ok" and body["unit"] == "USD"
    assert (body["model"], body["warning"], body["alert"], body["margin"]) == ("gpt-x", 2, 5, 0.1)
    assert [m["id"] for m in api.get("/api/monitors").json()] == [body["id"]]
    changed = api.send("PATCH", f"/api/monitors/{body['id']}", {"alert": 8, "name": "Spend!"})
    assert changed.status_code == 200, changed.content
    assert (changed.json()["alert"], changed.json()["name"], changed.json()["model"]) == (
        8,
        "Spend!",
        "gpt-x",
    )
    assert api.get(f"/api/monitors/{body['id']}").json()["history"] == []
    assert api.delete(f"/api/monitors/{body['id']}").status_code == 204
    assert api.get(f"/api/monitors/{body['id']}").status_code == 404
    assert Monitor.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "x", "metric": "nope", "alert": 1}, "metric"),
        ({"name": "x", "metric": "cost_day"}, "alert"),
        ({"name": "x", "metric": "cost_day", "alert": "lots"}, "alert"),
        ({"name": "x", "metric": "cost_day", "alert": -1}, "alert"),
        ({"name": "x", "metric": "cost_day", "alert": 1, "warning": 2}, "warning"),
        ({"name": "x", "metric": "cost_day", "alert": 1, "margin": 1.5}, "margin"),
        ({"name": "x", "metric": "error_rate", "alert": 1, "model": "m"}, "model"),  # not read: refused
        ({"name": "x", "metric": "gates_waiting", "alert": 1, "minutes": -3}, "minutes"),
        ({"name": "", "metric": "cost_day", "alert": 1}, "name"),
        ({"name": "x", "metric": "cost_day", "alert": 1, "colour": "red"}, "colour"),
    ],
)
def test_bad_input_is_refused_with_a_code_and_nothing_changes(workspace, body, field):
    answer = _client(workspace).post("/api/monitors", body)
    assert answer.status_code == 400, answer.content
    assert answer.json()["code"] == "INVALID_INPUT" and field in answer.json()["error"]
    assert Monitor.objects.count() == 0


def test_a_bad_patch_changes_nothing(workspace):
    monitor = do_create_monitor(workspace=workspace, data={"name": "a", "metric": "cost_day", "alert": 3})
    api = _client(workspace)
    answer = api.send("PATCH", f"/api/monitors/{monitor.public_id}", {"warning": 9})
    assert answer.status_code == 400 and answer.json()["code"] == "INVALID_INPUT"
    monitor.refresh_from_db()
    assert (monitor.warning, monitor.alert) == (None, 3)
    assert api.send("PATCH", f"/api/monitors/{monitor.public_id}", raw=b"[]").status_code == 400


def test_read_tokens_list_but_do_not_write(workspace):
    do_create_monitor(workspace=workspace, data={"name": "a", "metric": "cost_day", "alert": 3})
    reader = _client(workspace, scopes=("read",))
    assert len(reader.get("/api/monitors").json()) == 1
    assert reader.post("/api/monitors", {"name": "b", "metric": "cost_day", "alert": 1}).status_code == 403
    assert Monitor.objects.count() == 1


def test_another_workspaces_monitor_is_404(workspace, other_workspace):
    theirs = do_create_monitor(
        workspace=other_workspace, data={"name": "t", "metric": "cost_day", "alert": 3}
    )
    api = _client(workspace)
    assert api.get("/api/monitors").json() == []
    for method in ("GET", "PATCH", "DELETE"):
        answer = api.send(
            method, f"/api/monitors/{theirs.public_id}", {"alert": 1} if method == "PATCH" else None
        )
        assert answer.status_code == 404 and answer.json()["code"] == "MONITOR_NOT_FOUND"
    theirs.refresh_from_db()
    assert theirs.alert == 3


def test_page_owner_creates_edits_deletes_viewer_only_reads(workspace, alice, vera):
    owner = Client()
    owner.force_login(alice)
    created = owner.post(
        "/monitors/",
        {"op": "create", "name": "Errors <b>", "metric": "error_rate", "alert": "10", "warning": "5",
         "margin": "0.1", "workflow": "wf-demo", "enabled": "on"},
    )  # fmt: skip
    assert created.status_code == 302, created.content
    monitor = Monitor.objects.get()
    assert (monitor.metric, monitor.alert, monitor.warning, monitor.workflow_id) == (
        "error_rate",
        10,
        5,
        "wf-demo",
    )
    page = owner.get("/monitors/").content.decode()
    assert "Errors &lt;b&gt;" in page and "Errors <b>" not in page
    assert f'id="monitor-{monitor.public_id}"' in page and 'name="csrfmiddlewaretoken"' in page
    bad = owner.post("/monitors/", {"op": "create", "name": "x", "metric": "cost_day", "alert": "-1"})
    assert bad.status_code == 400 and b"INVALID_INPUT" in bad.content and Monitor.objects.count() == 1
    edited = owner.post(
        "/monitors/",
        {"op": "update", "monitor": monitor.public_id, "name": "Errors", "metric": "error_rate", "alert": "20",
         "margin": "0.1", "workflow": "", "enabled": "on"},
    )  # fmt: skip
    assert edited.status_code == 302
    monitor.refresh_from_db()
    assert (monitor.name, monitor.alert, monitor.warning, monitor.workflow_id) == ("Errors", 20, None, "")

    viewer = Client()
    viewer.force_login(vera)
    assert viewer.get("/monitors/").status_code == 200
    assert b"Add a monitor" not in viewer.get("/monitors/").content
    assert viewer.post("/monitors/", {"op": "delete", "monitor": monitor.public_id}).status_code == 403
    assert Monitor.objects.count() == 1
    assert owner.post("/monitors/", {"op": "delete", "monitor": "mon_missing"}).status_code == 404
    assert owner.post("/monitors/", {"op": "delete", "monitor": monitor.public_id}).status_code == 302
    assert Monitor.objects.count() == 0


def test_rollup_metrics_error_rate_rejections_and_waiting_gates(workspace, workflow):
    rate = do_create_monitor(workspace=workspace, data={"name": "e", "metric": "error_rate", "alert": 40})
    rejections = do_create_monitor(
        workspace=workspace, data={"name": "r", "metric": "rejection_rate", "alert": 50, "gate": "review"}
    )
    waiting = do_create_monitor(
        workspace=workspace, data={"name": "w", "metric": "gates_waiting", "alert": 1, "minutes": 10}
    )
    for run_id in ("run_n1", "run_n2"):
        actions.do_start_run(workspace=workspace, workflow=workflow, run_id=run_id)
        bring_review_gate(workspace, run_id)
    actions.do_command(
        workspace=workspace,
        run_id="run_n1",
        command=c.ResolveGate(step_id="review", gate="PAUSE_BEFORE", decision="rejected"),
        actor="user:alice",
    )
    actions.do_command(workspace=workspace, run_id="run_n1", command=c.FailRun(reason="rejected"))
    now = timezone.now()
    values = {e.monitor: e for e in evaluate_monitors(now=now)}
    assert (
        values[rate.public_id].value == 100.0 and values[rate.public_id].state == "alert"
    )  # 1 of 1 finished
    assert values[rejections.public_id].value == 100.0 and values[rejections.public_id].state == "alert"
    assert values[waiting.public_id].value == 0.0  # run_n2's gate waits, not yet 10 minutes
    later = {e.monitor: e for e in evaluate_monitors(now=now + timedelta(minutes=11))}
    assert later[waiting.public_id].value == 1.0 and later[waiting.public_id].state == "alert"


def _responses(workspace, run_id: str, durations_ms: list[int]) -> None:
    """Model responses that took ``durations_ms`` (the write path keeps the latency rollups)."""
    ts = timezone.now().strftime("%Y-%m-%dT%H:%M:%S.000Z")
    events = [
        {
            "id": f"evt_{run_id}_{ms}_{n}",
            "runId": run_id,
            "ts": ts,
            "type": "model_io",
            "direction": "response",
            "provider": "openai",
            "model": "gpt-slow",
            "durationMs": ms,
        }
        for n, ms in enumerate(durations_ms)
    ]
    actions.do_append_events(workspace=workspace, run_id=run_id, events=events)


def test_latency_p95_fires_when_over_and_stays_quiet_under(workspace, workflow):
    monitor = do_create_monitor(
        workspace=workspace,
        data={"name": "slow", "metric": "latency_p95", "model": "gpt-slow", "warning": 2, "alert": 4},
    )
    (empty,) = evaluate_monitors()
    assert (empty.value, empty.state, empty.changed) == (None, "ok", False)  # nothing measured yet
    actions.do_start_run(workspace=workspace, workflow=workflow, run_id="run_lat")
    _responses(workspace, "run_lat", [300] * 20)
    (under,) = evaluate_monitors()
    assert under.value is not None and under.value < 1 and (under.state, under.changed) == ("ok", False)
    _responses(workspace, "run_lat", [9000] * 20)  # half the calls now take 9 s: p95 over 4 s
    (over,) = evaluate_monitors()
    assert (
        over.monitor == monitor.public_id and over.value > 4 and (over.state, over.changed) == ("alert", True)
    )


def test_decision_p95_fires_when_over_and_stays_quiet_under(workspace, workflow):
    do_create_monitor(
        workspace=workspace,
        data={"name": "slow reviews", "metric": "decision_p95", "gate": "review", "alert": 600},
    )
    now = timezone.now()

    def decide(run_id: str, after: timedelta) -> None:
        actions.do_start_run(workspace=workspace, workflow=workflow, run_id=run_id)
        bring_review_gate(workspace, run_id)
        ts = (now + after).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        event = {
            "id": f"evt_{run_id}_decided",
            "runId": run_id,
            "ts": ts,
            "type": "human_gate_resolved",
            "stepId": "review",
            "gate": "PAUSE_BEFORE",
            "decision": "approved",
        }
        actions.do_append_events(workspace=workspace, run_id=run_id, events=[event], actor="user:alice")

    # read later the same UTC day: the window is the runs' start days (today), so an hour later
    # would read an empty window whenever the test runs after 23:00
    later = now.replace(hour=23, minute=59, second=59)
    decide("run_quick", timedelta(seconds=30))
    (under,) = evaluate_monitors(now=later)
    assert under.value is not None and under.value < 600 and (under.state, under.changed) == ("ok", False)
    decide("run_slow", timedelta(minutes=30))  # decided after half an hour: p95 over 10 minutes
    (over,) = evaluate_monitors(now=later)
    assert over.value > 600 and (over.state, over.changed) == ("alert", True)
