"""Run ids belong to a workspace: the same id in two workspaces is two runs, and one workspace
learns nothing about another's ids (no RUN_ID_COLLISION across workspaces, on any way in)."""

from __future__ import annotations

from django.test import Client
from workbench_sdk.client import make_event

from runs import actions
from runs.models import Event, Run
from runs.selectors.runs import get_run

RUN_ID = "run_shared_id"


def _bundle(workspace, workflow, run_id=RUN_ID) -> bytes:
    from runs.selectors.bundles import export_bundle_bytes

    run = actions.do_start_run(workspace=workspace, workflow=workflow, run_id=run_id, actor="t")
    actions.do_append_events(
        workspace=workspace, run_id=run_id, events=[make_event(run_id, "annotation", text="hello")]
    )
    data = export_bundle_bytes(Run.objects.get(pk=run.pk))
    actions.do_delete_run(workspace=workspace, run_id=run_id)
    return data


def test_the_same_run_id_from_two_workspaces_tokens_is_201_twice(api, outsider, workflow):
    first = api.post("/api/runs", {"workflow": workflow, "runId": RUN_ID})
    second = outsider.post("/api/runs", {"workflow": workflow, "runId": RUN_ID})
    assert (first.status_code, second.status_code) == (201, 201), second.content
    runs = Run.objects.filter(run_id=RUN_ID)
    assert sorted(r.workspace.slug for r in runs) == ["acme", "globex"]
    # Each workspace sees and writes its own run only.
    api.post(f"/api/runs/{RUN_ID}/annotations", {"text": "acme only"})
    assert api.get(f"/api/runs/{RUN_ID}/events").json()["lastSeq"] == 1
    assert outsider.get(f"/api/runs/{RUN_ID}/events").json()["lastSeq"] == 0
    assert "acme only" not in outsider.get(f"/api/runs/{RUN_ID}").content.decode()


def test_collision_only_inside_one_workspace(api, outsider, workflow):
    assert api.post("/api/runs", {"workflow": workflow, "runId": RUN_ID}).status_code == 201
    again = api.post("/api/runs", {"workflow": workflow, "runId": RUN_ID})
    assert again.status_code == 409 and again.json()["code"] == "RUN_ID_COLLISION"
    assert outsider.post("/api/runs", {"workflow": workflow, "runId": RUN_ID}).status_code == 201


def test_bundle_import_of_an_id_used_elsewhere_is_a_new_run(api, outsider, workspace, workflow):
    data = _bundle(workspace, workflow)
    assert outsider.post("/api/bundles", raw=data).status_code == 201
    assert api.post("/api/bundles", raw=data).status_code == 201
    again = api.post("/api/bundles", raw=data)
    assert again.status_code == 409 and again.json()["code"] == "RUN_ID_COLLISION"
    assert Run.objects.filter(run_id=RUN_ID).count() == 2


def test_put_of_a_foreign_id_creates_the_callers_own_run(api, outsider, workflow):
    assert api.post("/api/runs", {"workflow": workflow, "runId": RUN_ID}).status_code == 201
    state = api.get(f"/api/runs/{RUN_ID}").json()
    assert outsider.put(f"/api/runs/{RUN_ID}", state).status_code == 201
    assert Run.objects.filter(run_id=RUN_ID).count() == 2


def test_import_page_does_not_reveal_another_workspaces_id(
    charlie, alice, workspace, other_workspace, workflow
):
    data = _bundle(other_workspace, workflow)
    actions.do_import_bundle(workspace=other_workspace, data=data, actor="charlie")
    client = Client()
    client.force_login(alice)
    upload = client.post("/import/", {"bundle": _upload(data)})
    assert upload.status_code == 200
    assert b"RUN_ID_COLLISION" not in upload.content and b"already exists" not in upload.content
    token = upload.context["token"]
    confirmed = client.post("/import/", {"confirm": "1", "token": token})
    assert confirmed.status_code == 302
    assert get_run(workspace, RUN_ID).workspace_id == workspace.pk
    # ...and inside one workspace the collision is still reported.
    upload = client.post("/import/", {"bundle": _upload(data)})
    confirmed = client.post("/import/", {"confirm": "1", "token": upload.context["token"]})
    assert confirmed.status_code == 409 and b"RUN_ID_COLLISION" in confirmed.content


def _upload(data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile("b.json", data, content_type="application/json")


def test_same_id_runs_keep_their_own_events_lineage_and_projection(workspace, other_workspace, workflow):
    for ws in (workspace, other_workspace):
        actions.do_start_run(workspace=ws, workflow=workflow, run_id=RUN_ID, actor="t")
    actions.do_append_events(
        workspace=workspace, run_id=RUN_ID, events=[make_event(RUN_ID, "annotation", text="a")]
    )
    child = actions.do_fork_from_state(
        workspace=other_workspace, parent_run_id=RUN_ID, new_run_id="run_child"
    )
    mine, theirs = get_run(workspace, RUN_ID), get_run(other_workspace, RUN_ID)
    assert Event.objects.filter(run=mine).count() == 1
    assert Event.objects.filter(run=theirs).count() == 0
    from runs.selectors.runs import children

    assert children(workspace, RUN_ID) == []
    assert [c.pk for c in children(other_workspace, RUN_ID)] == [child.pk]
    actions.do_delete_run(workspace=workspace, run_id=RUN_ID)
    assert get_run(other_workspace, RUN_ID).pk == theirs.pk
    assert actions.rebuild_projection(theirs).revision == 0
