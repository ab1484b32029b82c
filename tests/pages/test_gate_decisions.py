"""Gate decisions on the run page: a CHECKPOINT approved with a note moves on; rejected runs show."""

from __future__ import annotations

import re

import pytest

from tests.pages.conftest import login

pytestmark = pytest.mark.django_db

CHECKPOINT_WF = {
    "id": "wf-cp",
    "version": 1,
    "steps": [{"id": "draft"}, {"id": "check", "gatePolicy": "CHECKPOINT"}, {"id": "send"}],
    "edges": [{"id": "e1", "from": "draft", "to": "check"}, {"id": "e2", "from": "check", "to": "send"}],
}


def _checkpoint_run(workspace, run_id="run_cp"):
    from runs import actions
    from runs.engine import commands as c

    actions.do_start_run(workspace=workspace, workflow=CHECKPOINT_WF, actor="pipeline", run_id=run_id)
    for command in (c.BeginStep("draft"), c.CompleteStep("draft"), c.BeginStep("check")):
        actions.do_command(workspace=workspace, run_id=run_id, command=command, actor="pipeline")


def test_checkpoint_gate_approved_with_a_note_is_no_longer_pending(client, bob, workspace):
    from runs.models import Run

    _checkpoint_run(workspace)
    assert Run.objects.get(run_id="run_cp").pending_gates == 1
    login(client, bob)
    resp = client.post(
        "/runs/run_cp/gates/resolve/",
        {"step_id": "check", "gate": "CHECKPOINT", "decision": "approved", "note": "facts verified"},
    )
    assert resp.status_code == 302
    run = Run.objects.get(run_id="run_cp")
    assert run.pending_gates == 0
    html = client.get("/runs/run_cp/").content.decode()
    assert "No gate is waiting." in html
    assert "<q>facts verified</q>" in html  # shown as the reviewer's note, not a checkpoint's name
    from runs import actions
    from runs.engine import commands as c

    # the pipeline can start the step now
    actions.do_command(workspace=workspace, run_id="run_cp", command=c.BeginStep("check"), actor="pipeline")
    assert Run.objects.get(run_id="run_cp").doc  # still consistent
    from runs.selectors.runs import fold_run, run_state

    run.refresh_from_db()
    assert run_state(run).step_status["check"] == "running"
    assert fold_run(run).to_json() == run_state(run).to_json()


def test_rejected_run_is_marked_in_header_list_graph_and_filter(client, bob, workspace, make_run):
    _checkpoint_run(workspace, "run_rej")
    make_run("run_ok")
    login(client, bob)
    client.post(
        "/runs/run_rej/gates/resolve/",
        {"step_id": "check", "gate": "CHECKPOINT", "decision": "rejected", "note": "numbers wrong"},
    )
    from runs.models import Run

    assert Run.objects.get(run_id="run_rej").rejected_gates == 1
    html = client.get("/runs/run_rej/").content.decode()
    assert 'class="badge badge-rejected">rejected · waiting for a retry or a fork' in html
    assert "gate-rejected" in html  # the graph's node for the step is red
    listing = client.get("/runs/").content.decode()
    row = listing[listing.index("run_rej") :]
    assert 'class="badge badge-rejected"' in row[: row.index("</tr>")]
    only = client.get("/runs/", {"status": "rejected"}).content.decode()
    assert "run_rej" in only and "run_ok" not in only


def test_not_found_page_is_branded(client, bob):
    login(client, bob)
    resp = client.get("/runs/no_such_run/")
    assert resp.status_code == 404
    html = resp.content.decode()
    assert "Page not found" in html and "Review inbox" in html


def test_api_docs_are_served_from_the_project(client, bob):
    login(client, bob)
    resp = client.get("/api/docs")
    html = resp.content.decode()
    assert resp.status_code == 200
    # no CDN host in any script or link (a random CSP nonce may spell "cdn", so look at the URLs)
    assert (
        not re.search(r'(?:src|href)="[^"]*cdn', html, re.I) and "/static/ninja/swagger-ui-bundle.js" in html
    )
    assert 'nonce="' in html


def test_tokens_page_links_the_api_docs(client, alice):
    login(client, alice)
    html = client.get("/workspace/tokens/").content.decode()
    assert 'href="/api/docs"' in html


def test_approve_with_edits_requires_an_edit(client, bob, workspace):
    from runs.models import Run

    _checkpoint_run(workspace, "run_edit_needed")
    login(client, bob)
    resp = client.post(
        "/runs/run_edit_needed/gates/resolve/",
        {"step_id": "check", "gate": "CHECKPOINT", "decision": "edited", "note": "tweaked"},
        follow=True,
    )
    assert "Approve with edits needs an artifact" in resp.content.decode()
    assert Run.objects.get(run_id="run_edit_needed").pending_gates == 1


def test_navigation_counts_pending_gates_and_rows_name_the_subject(client, bob, workspace, make_run):
    make_run("run_subject", subject={"userId": "user-zed", "tenantId": "t-9"})
    _checkpoint_run(workspace, "run_waiting")
    login(client, bob)
    html = client.get("/runs/inbox/").content.decode()
    assert (
        'class="badge badge-gate nav-count">2<' in html
    )  # run_subject waits at review, run_waiting at check
    listing = client.get("/runs/").content.decode()
    assert "user-zed · t-9" in listing and " data-rel>just now</time>" in listing


def test_ledger_numbers_have_separators_and_no_internal_names(client, alice, make_run, workspace):
    from runs import actions
    from runs.engine import commands as c

    run = make_run("run_big_tokens")
    actions.do_command(
        workspace=workspace,
        run_id=run.run_id,
        command=c.LogModelIO(
            direction="response",
            provider="openai",
            model="gpt-4.1-mini",
            usage={"inputTokens": 1234567, "outputTokens": 8901},
            step_id="parse",
            correlation_id="big",
        ),
        actor="pipeline",
    )
    login(client, alice)
    html = client.get(f"/runs/{run.run_id}/ledger/").content.decode()
    assert "1,234,687" in html and "8,941" in html  # 120 + 1,234,567 input; 40 + 8,901 output
    assert "summarizeModelTelemetry" not in html


def test_approve_with_edits_starts_from_the_current_version_and_keeps_a_refused_input(client, bob, workspace):
    from runs import actions
    from runs.engine import commands as c
    from runs.models import Run

    _checkpoint_run(workspace, "run_edit_prefill")
    data = {"subject": "Your order", "tone": "warm"}
    actions.do_command(
        workspace=workspace,
        run_id="run_edit_prefill",
        command=c.WriteArtifact(key="gate:check:CHECKPOINT", type_id="json", data=data),
        actor="pipeline",
    )
    login(client, bob)
    page = client.get("/runs/run_edit_prefill/").content.decode()
    assert '<option value="gate:check:CHECKPOINT" selected>' in page
    box = re.search(r'<textarea id="ed-1" name="edit_data"[^>]*>([^<]*)</textarea>', page)
    assert box and "&quot;subject&quot;: &quot;Your order&quot;" in box.group(1)  # not an empty box
    typed = '{"subject": "Your order", "tone": cold}'  # not JSON: refused
    refused = client.post(
        "/runs/run_edit_prefill/gates/resolve/",
        {
            "step_id": "check",
            "gate": "CHECKPOINT",
            "decision": "edited",
            "edit_key": "gate:check:CHECKPOINT",
            "edit_data": typed,
        },
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert 'aria-invalid="true"' in refused
    assert "{&quot;subject&quot;: &quot;Your order&quot;, &quot;tone&quot;: cold}</textarea>" in refused
    assert Run.objects.get(run_id="run_edit_prefill").pending_gates == 1
