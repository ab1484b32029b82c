"""Decisions from the review inbox: in the row with htmx, a plain form without JS; the gate panel's
permission checks and write path (runs:resolve_gate, runs.actions)."""

from __future__ import annotations

import json
import re

import pytest

from tests.pages.conftest import XSS, login

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}


def _decide(client, decision="approved", *, htmx=True, run_id="run_a", **fields):
    """What an inbox row's form posts (the review step's PAUSE_BEFORE gate unless told otherwise)."""
    data = {"return": "inbox", "step_id": "review", "gate": "PAUSE_BEFORE", "decision": decision, **fields}
    return client.post(f"/runs/{run_id}/gates/resolve/", data, headers=HX if htmx else {})


def _last_gate_event(run):
    from runs.protocol.values import loads

    event = run.events.filter(type="human_gate_resolved").order_by("-seq").first()
    return (loads(event.body), event.actor) if event else (None, None)


def test_inbox_rows_carry_a_decision_form_for_reviewers(client, bob, make_run):
    make_run("run_a", metadata={"workbench.title": "Invoice 42"})
    html = login(client, bob).get("/runs/inbox/").content.decode()
    row = re.search(r'<tr class="inbox-row".*?</tr>', html, re.S).group(0)
    assert 'name="decision" value="approved"' in row and 'name="decision" value="rejected"' in row
    assert 'name="return" value="inbox"' in row and 'name="note"' in row
    assert row.count("data-confirm=") == 1  # Reject asks first
    assert 'data-key-action="approve" data-undo="Approving PAUSE_BEFORE on review' in row  # Approve: undo
    assert 'data-review-item="run_a/review/PAUSE_BEFORE/"' in row and "data-key-note" in row
    assert "review" in row and "started" in row  # waiting step and age


def test_htmx_approve_with_a_note_swaps_the_row_and_records_who(client, bob, make_run):
    from runs.models import Run

    make_run("run_a")
    login(client, bob)
    response = _decide(client, "approved", row_key="7-0", note="fine by me")
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<tr class="inbox-row"') and html.count("<tr") == 1
    assert 'role="status"' in html and "badge-approved" in html
    said = json.loads(response["HX-Trigger"])["inbox:decided"]
    assert said == {
        "text": "Approved: PAUSE_BEFORE on review of “Parse, review, publish”.",
        "pending": 0,
        "target": "body",
    }
    run = Run.objects.get(run_id="run_a")
    assert run.pending_gates == 0
    body, actor = _last_gate_event(run)
    assert body["decision"] == "approved" and body["note"] == "fine by me" and actor == "user:bob"


def test_reject_without_js_goes_back_to_the_inbox_with_a_message(client, bob, make_run):
    from runs.models import Run

    make_run("run_a")
    login(client, bob)
    response = _decide(client, "rejected", htmx=False)
    assert response.status_code == 302 and response["Location"] == "/runs/inbox/"
    assert Run.objects.get(run_id="run_a").rejected_gates == 1
    page = client.get("/runs/inbox/").content.decode()
    assert "Rejected: PAUSE_BEFORE on review" in page
    assert 'class="inbox-row"' not in page  # nothing waits any more


def test_a_refused_decision_keeps_the_form_and_says_why(client, bob, make_run):
    make_run("run_a")
    login(client, bob)
    response = _decide(client, "approved", row_key="1-0", step_id="publish", gate="PAUSE_AFTER")
    html = response.content.decode()
    assert 'role="alert"' in html and "INVALID_STATE_TRANSITION" in html
    assert 'name="decision" value="approved"' in html and 'id="note-1-0"' in html


def test_a_refused_decision_on_a_pending_gate_keeps_its_reason(client, bob, workspace, make_run):
    from runs import actions
    from runs.engine import commands as c

    make_run("run_a")
    actions.do_command(
        workspace=workspace,
        run_id="run_a",
        command=c.RequestGate("review", "PAUSE_BEFORE", reason="check facts"),
    )
    login(client, bob)
    html = _decide(client, "edited", row_key="2-0").content.decode()  # an edit without one: refused
    assert 'role="alert"' in html and "check facts" in html


def test_row_keys_from_the_form_cannot_inject_markup(client, bob, make_run):
    make_run("run_a")
    login(client, bob)
    html = _decide(client, "approved", row_key=XSS, step_id="nope").content.decode()
    assert "<script>" not in html and 'id="note-0"' in html


def test_viewers_see_no_form_and_cannot_post(client, vera, make_run):
    from runs.models import Run

    make_run("run_a")
    login(client, vera)
    html = client.get("/runs/inbox/").content.decode()
    assert 'class="inbox-row"' in html and 'name="decision"' not in html
    response = _decide(client, "approved")
    assert response.status_code == 403
    assert Run.objects.get(run_id="run_a").pending_gates == 1


def test_outsiders_get_404_and_change_nothing(client, charlie, make_run):
    from runs.models import Run

    make_run("run_a")
    login(client, charlie)
    response = _decide(client, "approved")
    assert response.status_code == 404
    assert Run.objects.get(run_id="run_a").pending_gates == 1


def test_inbox_pages_by_keyset_cursor(client, bob, make_run, monkeypatch):
    from runs.pages import inbox

    monkeypatch.setattr(inbox, "INBOX_LIMIT", 2)
    for run_id in ("run_a", "run_b", "run_c"):
        make_run(run_id)
    login(client, bob)
    first = client.get("/runs/inbox/").content.decode()
    assert first.count('<tr class="inbox-row"') == 2
    cursor = re.search(r'href="/runs/inbox/\?cursor=([^"]+)"', first).group(1)
    second = client.get(f"/runs/inbox/?cursor={cursor}").content.decode()
    assert second.count('<tr class="inbox-row"') == 1 and "Older runs" not in second
    assert set(re.findall(r'data-run="(run_\w)"', first + second)) == {"run_a", "run_b", "run_c"}
    assert client.get("/runs/inbox/?cursor=nonsense").status_code == 400


def test_an_edit_the_schema_refuses_is_said_in_words_next_to_the_field(client, bob, make_run):
    make_run("run_a")
    login(client, bob)
    data = {
        "step_id": "review",
        "gate": "PAUSE_BEFORE",
        "decision": "edited",
        "edit_key": "rule",
        "edit_type": "rules.basic",
        "edit_data": '{"kind": "", "value": 1}',
    }
    html = client.post("/runs/run_a/gates/resolve/", data, headers=HX).content.decode()
    error = re.search(r'<p class="field-error" id="(ed-1-err)" role="alert">([^<]*)</p>', html)
    assert error and error.group(2) == "kind: This field cannot be empty."
    assert 'aria-describedby="ed-1-err"' in html and "<details data-edit open>" in html
    assert "INVALID_INPUT" not in html and "should be non-empty" not in html


def test_next_gate_goes_to_the_next_waiting_run_then_back_to_the_inbox(client, bob, workspace, make_run):
    make_run("run_a")
    make_run("run_b")
    login(client, bob)
    first = client.get("/runs/inbox/next/?after=run_a")["Location"]
    assert first == "/runs/run_b/#gate-panel"
    assert client.get("/runs/inbox/next/?after=run_b")["Location"] == "/runs/run_a/#gate-panel"
    assert client.get("/runs/inbox/next/?after=nope")["Location"].endswith("#gate-panel")
    page = client.get("/runs/run_a/").content.decode()
    assert 'href="/runs/inbox/next/?after=run_a" id="next-gate-link"' in page
    # the pending gate's summary is the first stop after the skip link
    assert page.index('id="review-gate-link"') < page.index('class="site-header topbar"')
    _decide(client, "approved", run_id="run_a")
    _decide(client, "approved", run_id="run_b")
    assert client.get("/runs/inbox/next/?after=run_b")["Location"] == "/runs/inbox/"
