"""“Approve with edits” through the artifact's schema form: prefilled from the current version,
checked by the same validator while typing (runs:gate_edit) and at the decision, recorded as a
JSON Patch; a refused edit records nothing and keeps what was typed."""

from __future__ import annotations

import re

import pytest

from runs import actions
from runs.engine import commands as c
from runs.models import Run
from runs.selectors.runs import run_state
from tests.pages.conftest import login

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}
WF = {
    "id": "wf-profile",
    "version": 1,
    "steps": [{"id": "parse"}, {"id": "review", "gatePolicy": "PAUSE_BEFORE"}, {"id": "publish"}],
    "edges": [{"id": "e1", "from": "parse", "to": "review"}, {"id": "e2", "from": "review", "to": "publish"}],
}
PROFILE = {"headline": "Engineer", "skills": ["python", "sql"], "summary": "ok", "yearsOfExperience": 4}


@pytest.fixture
def profile_run(workspace):
    actions.do_start_run(workspace=workspace, workflow=WF, actor="pipeline", run_id="run_profile")
    for command in (
        c.BeginStep("parse"),
        c.WriteArtifact(key="profile", type_id="job.profile", data=PROFILE),
        c.CompleteStep("parse"),
    ):
        actions.do_command(workspace=workspace, run_id="run_profile", command=command, actor="pipeline")
    return Run.objects.get(run_id="run_profile")


def _form(**fields):
    post = {
        "step_id": "review",
        "gate": "PAUSE_BEFORE",
        "decision": "edited",
        "edit_key": "profile",
        "edit_form_key": "profile",
        "edit_editor": "form",
        "edit_from_version": "1",
        "edit_slot": "1",
        "/headline": "Engineer",
        "/skills": "python\nsql",
        "/summary": "ok",
        "/yearsOfExperience": "4",
        "/remoteOnly": "false",
    }
    post.update(fields)
    return post


def test_the_gate_edit_is_the_schema_form_prefilled_from_the_current_version(client, bob, profile_run):
    login(client, bob)
    page = client.get("/runs/run_profile/").content.decode()
    assert '<input type="hidden" name="edit_editor" value="form">' in page
    assert re.search(r'id="g1-f-headline" name="/headline" value="Engineer"', page)
    assert re.search(r'<textarea id="g1-f-skills" name="/skills"[^>]*>python\nsql</textarea>', page)
    assert 'id="g1-f-remoteOnly"' in page  # a boolean: a checkbox
    assert 'name="edit_data"' not in page  # no JSON box for an artifact with a form


def test_approve_with_edits_records_the_change_as_a_patch(client, bob, profile_run):
    login(client, bob)
    resp = client.post(
        "/runs/run_profile/gates/resolve/",
        _form(**{"/headline": "Staff engineer", "note": "sharper"}),
        headers=HX,
    )
    assert resp.status_code == 200
    profile_run.refresh_from_db()
    state = run_state(profile_run)
    assert state.artifacts["profile"]["version"] == 2
    assert state.artifacts["profile"]["data"] == {**PROFILE, "headline": "Staff engineer"}
    events = [e.data for e in profile_run.events.order_by("seq")]
    patch = next(e for e in events if e["type"] == "artifact_patch")
    assert (
        patch["fromVersion"] == 1
        and {"op": "replace", "path": "/headline", "value": "Staff engineer"} in patch["patch"]
    )
    decided = next(e for e in events if e["type"] == "human_gate_resolved")
    assert decided["decision"] == "edited" and decided["note"] == "sharper"
    assert profile_run.pending_gates == 0


def test_an_invalid_value_is_refused_in_words_next_to_its_field_and_nothing_is_recorded(
    client, bob, profile_run
):
    login(client, bob)
    before = profile_run.last_seq
    html = client.post(
        "/runs/run_profile/gates/resolve/",
        _form(**{"/yearsOfExperience": "-3", "/headline": "Lead"}),
        headers=HX,
    ).content.decode()
    assert "Enter a value of at least 0." in html
    assert re.search(
        r'id="g1-f-yearsOfExperience" name="/yearsOfExperience" value="-3" aria-invalid="true"', html
    )
    assert 'value="Lead"' in html  # what was typed stays
    assert "<details data-edit open>" in html
    profile_run.refresh_from_db()
    assert profile_run.last_seq == before and profile_run.pending_gates == 1
    # not a number at all: said in words, not a traceback
    html = client.post(
        "/runs/run_profile/gates/resolve/", _form(**{"/yearsOfExperience": "many"}), headers=HX
    ).content.decode()
    assert "Enter a number." in html
    profile_run.refresh_from_db()
    assert profile_run.last_seq == before


def test_the_check_while_typing_uses_the_same_validator_and_records_nothing(client, bob, profile_run):
    login(client, bob)
    before = profile_run.last_seq
    resp = client.post("/runs/run_profile/gates/edit/", _form(**{"/headline": ""}), headers=HX)
    assert resp.status_code == 200
    html = resp.content.decode()
    assert "This field cannot be empty." in html and "autofocus" not in html
    assert (
        client.post("/runs/run_profile/gates/edit/", _form(), headers=HX).content.decode().count("errorlist")
        == 0
    )
    profile_run.refresh_from_db()
    assert profile_run.last_seq == before


def test_no_change_and_a_stale_form_are_refused(client, bob, profile_run):
    login(client, bob)
    html = client.post("/runs/run_profile/gates/resolve/", _form(), headers=HX).content.decode()
    assert "The form has no changes" in html
    html = client.post(
        "/runs/run_profile/gates/resolve/", _form(edit_from_version="7", **{"/headline": "X"}), headers=HX
    ).content.decode()
    assert "no longer matches profile" in html
    profile_run.refresh_from_db()
    assert profile_run.pending_gates == 1


def test_the_check_needs_a_reviewer_of_the_runs_workspace(client, vera, charlie, profile_run):
    login(client, vera)  # a viewer
    assert client.post("/runs/run_profile/gates/edit/", _form(), headers=HX).status_code == 403
    login(client, charlie)  # another workspace's member
    assert client.post("/runs/run_profile/gates/edit/", _form(), headers=HX).status_code == 404
