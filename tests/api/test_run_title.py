"""A run's title set by the pipeline: engine rules, the host API, REST (start and update), the
Python client, bundles; shown in the runs list and the inbox with short id, waiting step, age."""

from __future__ import annotations

import pytest

from runs.engine.errors import EngineError
from runs.engine.lifecycle import TITLE_KEY, check_title, run_title


def test_title_rules_and_fallbacks():
    assert check_title("  Invoice 42  ") == "Invoice 42"
    for bad in ("", "   ", 42, None, "x" * 301, "tab\there", "bell\x07", "c1\x85c1"):
        with pytest.raises(EngineError) as err:
            check_title(bad)
        assert err.value.code == "INVALID_INPUT"
    wf = {"workflowId": "wf", "workflowSnapshot": {"title": "Flow"}}
    assert run_title({**wf, "metadata": {TITLE_KEY: "Mine"}}) == "Mine"
    assert run_title({**wf, "metadata": {TITLE_KEY: 7}}) == "Flow"  # a bundle may carry anything
    assert run_title({"workflowId": "wf", "workflowSnapshot": {}}) == "wf"


@pytest.mark.django_db
def test_host_api_sets_and_changes_the_title_and_the_fold_agrees(workspace, workflow):
    from runs.execution.host import Workbench
    from runs.selectors.runs import fold_run, run_state

    wb = Workbench(workspace=workspace, actor="pipeline")
    session = wb.start_run(workflow=workflow, run_id="run_t", title="Invoice 42", metadata={"k": 1})
    run = session.run
    assert run.title == "Invoice 42" and run.run_doc["metadata"] == {"k": 1, TITLE_KEY: "Invoice 42"}
    session.begin_step("parse")
    run = session.set_title("Invoice 42 (retry)")
    assert run.title == "Invoice 42 (retry)"
    run.refresh_from_db()
    assert run.run_doc["metadata"][TITLE_KEY] == "Invoice 42 (retry)"
    assert fold_run(run).to_json() == run_state(run).to_json()
    with pytest.raises(Exception) as err:
        session.set_title("")
    assert getattr(err.value, "code", "") == "INVALID_INPUT"
    run.refresh_from_db()
    assert run.title == "Invoice 42 (retry)"


@pytest.mark.django_db
def test_rest_start_and_update(api, reader, outsider, workflow):
    from runs.models import Run

    response = api.post("/api/runs", {"workflow": workflow, "runId": "run_r", "title": "Contract A"})
    assert response.status_code == 201, response.content
    assert Run.objects.get(run_id="run_r").title == "Contract A"
    response = api.send("PATCH", "/api/runs/run_r", {"title": "Contract A, signed"})
    assert response.status_code == 200 and response.json()["runId"] == "run_r"
    assert Run.objects.get(run_id="run_r").title == "Contract A, signed"
    bad = api.send("PATCH", "/api/runs/run_r", {"title": "  "})
    assert bad.status_code == 400 and bad.json()["code"] == "INVALID_INPUT"
    assert reader.send("PATCH", "/api/runs/run_r", {"title": "x"}).status_code == 403
    assert outsider.send("PATCH", "/api/runs/run_r", {"title": "x"}).status_code == 404
    assert api.send("PATCH", "/api/runs/run_missing", {"title": "x"}).status_code == 404
    too_long = api.post("/api/runs", {"workflow": workflow, "runId": "run_l", "title": "x" * 301})
    assert too_long.status_code == 400 and not Run.objects.filter(run_id="run_l").exists()
    assert Run.objects.get(run_id="run_r").title == "Contract A, signed"


@pytest.mark.django_db
def test_bundles_carry_the_title_both_ways(workspace, other_workspace, workflow):
    from runs import actions
    from runs.models import Run
    from runs.selectors.bundles import export_bundle_bytes

    actions.do_start_run(workspace=workspace, workflow=workflow, run_id="run_b", title="Lease renewal")
    data = export_bundle_bytes(Run.objects.get(run_id="run_b"))
    assert b'"workbench.title":"Lease renewal"' in data
    imported = actions.do_import_bundle(workspace=other_workspace, data=data)
    assert imported.title == "Lease renewal"
    renamed = actions.do_set_run_title(workspace=other_workspace, run_id="run_b", title="Lease, v2")
    from runs.selectors.runs import fold_run, run_state

    assert fold_run(renamed).to_json() == run_state(renamed).to_json()
    assert b'"workbench.title":"Lease, v2"' in export_bundle_bytes(renamed)


def test_python_client_sets_the_title(live_server, transactional_db, workspace, workflow):
    from workbench_sdk.client import WorkbenchClient

    from accounts.tokens import create_token
    from runs.models import Run

    token = create_token(workspace=workspace, name="host", scopes=["read", "write"]).secret
    with WorkbenchClient(live_server.url, token, sleep=lambda s: None) as wb:
        run_id = wb.start_run(workflow=workflow, title="Claim 7")["runId"]
        assert Run.objects.get(run_id=run_id).title == "Claim 7"
        wb.set_title(run_id, "Claim 7 (escalated)")
    assert Run.objects.get(run_id=run_id).title == "Claim 7 (escalated)"
