"""Lists of objects (job.posting, job.match_scores: arrays at the root) are edited as forms: a
group per item with "Remove this item", a blank group with "Add this item", errors next to the
field of the item they concern even after a removal shifted the list."""

from __future__ import annotations

import re

import pytest

from runs.web.artifact_forms import build_form, form_schema_errors, parse_form, schema_registry
from tests.pages.conftest import login

pytestmark = pytest.mark.django_db

POSTINGS = [
    {"id": "j1", "title": "Staff Backend Engineer", "company": "Northwind", "url": "u1", "remote": True},
    {"id": "j2", "title": "ML Platform Engineer", "company": "Contoso", "url": "u2"},
    {
        "id": "j3",
        "title": "Python Developer",
        "company": "Fabrikam",
        "url": "u3",
        "salary": {"min": 1, "currency": "EUR"},
    },
]


def test_a_root_list_of_objects_is_a_group_per_item_plus_a_new_one():
    form = build_form(schema_registry().get("job.posting"), POSTINGS)
    assert form is not None and form.kind == "items"
    assert [g.label for g in form.children] == [
        "Item 1: Staff Backend Engineer",
        "Item 2: ML Platform Engineer",
        "Item 3: Python Developer",
        "New item",
    ]
    assert [g.item for g in form.children] == ["existing", "existing", "existing", "new"]
    pointers = [f.pointer for f in form.walk()]
    assert "/2/salary/currency" in pointers and "/3/title" in pointers


def test_parse_edits_removes_and_adds_items():
    form = build_form(schema_registry().get("job.posting"), POSTINGS)
    post = {f.pointer: f.text for f in form.walk() if f.kind in ("text", "number")}
    post.update({"/0/remote": "true", "/1/remote": "false", "/2/remote": "false", "/3/remote": "false"})
    post["/0/title"] = "Principal Engineer"
    post["/1#remove"] = "on"
    post.update({"/3#add": "on", "/3/id": "j4", "/3/title": "SRE", "/3/company": "Initech", "/3/url": "u4"})
    data, problems = parse_form(form, post, POSTINGS)
    assert problems == []
    assert [p["id"] for p in data] == ["j1", "j3", "j4"]
    assert data[0]["title"] == "Principal Engineer" and data[1]["salary"] == {"min": 1, "currency": "EUR"}
    # an optional box left unticked adds no ``false`` the data did not have
    assert data[2] == {"id": "j4", "title": "SRE", "company": "Initech", "url": "u4"}
    # an error in the added item (data index 2) belongs to the form's new group (/3), not to j3 (/2)
    post["/3/company"] = ""
    data, _ = parse_form(form, post, POSTINGS)
    errors = form_schema_errors(form, schema_registry().get("job.posting"), data)
    assert [e["path"] for e in errors] == ["/3/company"]


def test_postings_page_saves_through_the_form(client, alice, make_run, workspace):
    from runs import actions
    from runs.engine import commands as c
    from runs.selectors.runs import run_state

    run = make_run("run_postings")
    actions.do_command(
        workspace=workspace,
        run_id=run.run_id,
        command=c.WriteArtifact(key="postings", type_id="job.posting", data=POSTINGS),
        actor="user:alice",
    )
    login(client, alice)
    url = f"/runs/{run.run_id}/artifacts/"
    html = client.get(url, {"key": "postings"}).content.decode()
    assert 'name="editor" value="form"' in html and "edited as JSON" not in html
    assert 'name="/1#remove"' in html and 'name="/3#add"' in html
    hidden = dict(
        re.findall(r'<input type="hidden" name="(key|base_version|idempotency_key)" value="([^"]*)"', html)
    )
    form = build_form(schema_registry().get("job.posting"), POSTINGS)
    post = {f.pointer: f.text for f in form.walk() if f.kind in ("text", "number")}
    post.update(hidden)
    post.update({"editor": "form", "mode": "patch", "/0#remove": "on", "/3#add": "on", "/3/id": "j9"})
    bad = client.post(url, post)
    page = bad.content.decode()
    assert bad.status_code == 422
    assert (
        'id="f-3-title-err"' in page and "This field cannot be empty." in page
    )  # next to the new item's field
    assert re.search(r'id="f-0-remove"[^>]*checked', page) and re.search(r'id="f-3-add"[^>]*checked', page)
    post.update({"/3/title": "Tester", "/3/company": "Globex", "/3/url": "u9"})
    assert client.post(url, post).status_code == 302
    run.refresh_from_db()
    assert [p["id"] for p in run_state(run).artifacts["postings"]["data"]] == ["j2", "j3", "j9"]
