"""Artifact editor (versions, diff, inline schema errors, idempotent save), rules, ledgers, import."""

from __future__ import annotations

import re

import pytest

from tests.pages.conftest import login

pytestmark = pytest.mark.django_db


@pytest.fixture
def profile_run(make_run, workspace):
    from runs import actions
    from runs.engine import commands as c

    run = make_run("run_edit")
    actions.do_command(
        workspace=workspace,
        run_id=run.run_id,
        command=c.WriteArtifact(
            key="profile", type_id="job.profile", data={"headline": "Eng", "skills": ["py"], "summary": "s"}
        ),
        actor="user:alice",
    )
    actions.do_command(
        workspace=workspace,
        run_id=run.run_id,
        command=c.ChangeRuleSet(
            rule_set={
                "id": "filters",
                "ruleSchemaId": "rules.basic",
                "rules": [
                    {
                        "id": "r1",
                        "priority": 10,
                        "enabled": True,
                        "payload": {"kind": "remote", "value": True},
                    },
                    {
                        "id": "r2",
                        "priority": 5,
                        "enabled": False,
                        "payload": {"kind": "salary", "value": 100},
                    },
                ],
            }
        ),
        actor="user:alice",
    )
    run.refresh_from_db()
    return run


def _form(html: str) -> dict[str, str]:
    return {
        name: value
        for name, value in re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', html)
        if name in ("key", "base_version", "idempotency_key")
    }


def test_artifact_editor_shows_schema_errors_next_to_the_field_then_saves(client, bob, profile_run):
    login(client, bob)
    url = f"/runs/{profile_run.run_id}/artifacts/"
    page = client.get(url, {"key": "profile"}).content.decode()
    form = _form(page)
    assert form["base_version"] == "1" and form["idempotency_key"].startswith("web-")
    bad_json = client.post(url, {**form, "data": "{not json", "mode": "patch"})
    assert bad_json.status_code == 422 and "Not valid JSON" in bad_json.content.decode()
    invalid = client.post(url, {**form, "data": '{"headline": "", "skills": ["py"]}', "mode": "patch"})
    html = invalid.content.decode()
    assert invalid.status_code == 422
    assert 'aria-invalid="true"' in html and "/headline" in html and "/summary" in html
    assert "&quot;headline&quot;: &quot;&quot;" in html  # the user's text is kept, escaped
    ok = client.post(
        url, {**form, "data": '{"headline": "Senior", "skills": ["py"], "summary": "s"}', "mode": "patch"}
    )
    assert ok.status_code == 302
    again = client.post(
        url, {**form, "data": '{"headline": "Senior", "skills": ["py"], "summary": "s"}', "mode": "patch"}
    )
    assert again.status_code == 302  # double submit: same idempotency key, no second version
    from runs.models import ArtifactVersion, Event

    assert list(
        ArtifactVersion.objects.filter(run=profile_run, key="profile").values_list("version", flat=True)
    ) == [1, 2]
    patch_event = Event.objects.get(run=profile_run, type="artifact_patch")
    assert patch_event.actor == "user:bob"


def test_artifact_full_write_and_stale_base_is_a_conflict(client, alice, profile_run):
    login(client, alice)
    url = f"/runs/{profile_run.run_id}/artifacts/"
    form = _form(client.get(url, {"key": "profile"}).content.decode())
    body = '{"headline": "A", "skills": [], "summary": "x"}'
    assert client.post(url, {**form, "data": body, "mode": "write"}).status_code == 302
    other = _form(client.get(url, {"key": "profile"}).content.decode())
    stale = client.post(
        url, {**form, "idempotency_key": other["idempotency_key"], "data": body, "mode": "patch"}
    )
    assert stale.status_code == 409 and "version 2" in stale.content.decode()


def test_artifact_diff_between_versions(client, alice, profile_run, workspace):
    from runs import actions
    from runs.engine import commands as c

    actions.do_command(
        workspace=workspace,
        run_id=profile_run.run_id,
        command=c.PatchArtifact(
            key="profile", from_version=1, patch=[{"op": "replace", "path": "/headline", "value": "Lead"}]
        ),
    )
    login(client, alice)
    html = client.get(
        f"/runs/{profile_run.run_id}/artifacts/diff/", {"key": "profile", "a": 1, "b": 2}
    ).content.decode()
    assert "/headline" in html and "&quot;Eng&quot; → &quot;Lead&quot;" in html
    assert (
        client.get(
            f"/runs/{profile_run.run_id}/artifacts/diff/", {"key": "profile", "a": 1, "b": 9}
        ).status_code
        == 404
    )


def test_simple_schemas_get_a_form(client, alice, make_run, workspace):
    from runs import actions
    from runs.engine import commands as c
    from runs.web.artifact_forms import schema_registry

    schema = {
        "type": "object",
        "required": ["name", "score"],
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "score": {"type": "integer", "minimum": 0},
            "ok": {"type": "boolean"},
        },
    }
    schema_registry().register("test.simple", schema)
    run = make_run("run_form")
    actions.do_command(
        workspace=workspace,
        run_id=run.run_id,
        command=c.WriteArtifact(key="s", type_id="test.simple", data={"name": "a", "score": 1}),
    )
    login(client, alice)
    url = f"/runs/{run.run_id}/artifacts/"
    page = client.get(url, {"key": "s"}).content.decode()
    assert 'name="/score"' in page and 'name="/name"' in page
    form = _form(page)
    bad = client.post(url, {**form, "editor": "form", "/name": "a", "/score": "-3", "mode": "write"})
    html = bad.content.decode()
    assert bad.status_code == 422 and 'id="f-score-err"' in html and "Enter a value of at least 0." in html
    assert re.search(r'id="f-score"[^>]*aria-invalid="true"[^>]*autofocus', html)  # focus goes there
    notnum = client.post(url, {**form, "editor": "form", "/name": "a", "/score": "abc", "mode": "write"})
    assert "Enter a whole number." in notnum.content.decode()
    assert 'value="abc"' in notnum.content.decode()  # what was typed stays
    good = client.post(
        url,
        {**form, "editor": "form", "/name": "b", "/score": "4", "/ok": "true", "mode": "write"},
    )
    assert good.status_code == 302
    from runs.selectors.runs import run_state

    run.refresh_from_db()
    assert run_state(run).artifacts["s"]["data"] == {"name": "b", "score": 4, "ok": True}


def test_union_nested_and_array_schemas_get_a_form(client, alice, make_run, workspace):
    """rules.basic-style unions, nested objects, arrays of scalars; anything else is a JSON box."""
    from runs import actions
    from runs.engine import commands as c
    from runs.web.artifact_forms import schema_registry

    schema = {
        "type": "object",
        "required": ["kind", "value"],
        "properties": {
            "kind": {"type": "string", "minLength": 1},
            "value": {"type": ["string", "number", "boolean"]},
            "where": {
                "type": "object",
                "required": ["city"],
                "properties": {"city": {"type": "string"}, "radius": {"type": "integer", "minimum": 1}},
            },
            "tags": {"type": "array", "items": {"type": "string"}},
            "extra": {"oneOf": [{"type": "string"}, {"type": "array"}]},
        },
        "additionalProperties": False,
    }
    schema_registry().register("test.union", schema)
    run = make_run("run_union")
    data = {"kind": "salary", "value": 100, "where": {"city": "Oslo"}, "tags": ["a", "b"]}
    actions.do_command(
        workspace=workspace,
        run_id=run.run_id,
        command=c.WriteArtifact(key="u", type_id="test.union", data=data),
    )
    login(client, alice)
    url = f"/runs/{run.run_id}/artifacts/"
    page = client.get(url, {"key": "u"})
    html = page.content.decode()
    assert page.status_code == 200
    assert 'name="/value#type"' in html and '<option value="integer"' not in html
    assert re.search(r'<option value="number" selected>number</option>', html)
    assert 'name="/where/city"' in html and 'name="/where/radius"' in html
    assert ">a\nb</textarea>" in html and "Edited as JSON" in html
    form = _form(html)
    post = {
        **form,
        "editor": "form",
        "mode": "patch",
        "/kind": "salary",
        "/value#type": "number",
        "/value": "lots",
        "/where/city": "Oslo",
        "/where/radius": "0",
        "/tags": "a\nb\nc",
        "/extra": "",
    }
    bad = client.post(url, post)
    html = bad.content.decode()
    assert bad.status_code == 422 and "Enter a number." in html
    post["/value"] = "120"
    bad = client.post(url, post)
    html = bad.content.decode()
    assert (
        bad.status_code == 422
        and "Enter a value of at least 1." in html
        and 'id="f-where-radius-err"' in html
    )
    post["/where/radius"] = "5"
    post["/extra"] = '["x"]'
    assert client.post(url, post).status_code == 302
    from runs.selectors.runs import run_state

    run.refresh_from_db()
    assert run_state(run).artifacts["u"]["data"] == {
        "kind": "salary",
        "value": 120,
        "where": {"city": "Oslo", "radius": 5},
        "tags": ["a", "b", "c"],
        "extra": ["x"],
    }
    assert client.get(url, {"key": "u", "editor": "json"}).content.decode().count('name="data"') == 1


def test_shipped_rules_basic_schema_renders_a_form(client, alice, make_run, workspace):
    """The shipped rules.basic has a union type: the editor used to answer 500."""
    from runs import actions
    from runs.engine import commands as c

    run = make_run("run_rules_basic")
    actions.do_command(
        workspace=workspace,
        run_id=run.run_id,
        command=c.WriteArtifact(key="rule", type_id="rules.basic", data={"kind": "remote", "value": True}),
    )
    login(client, alice)
    page = client.get(f"/runs/{run.run_id}/artifacts/", {"key": "rule"})
    assert page.status_code == 200 and 'name="/value#type"' in page.content.decode()
    form = _form(page.content.decode())
    post = {
        **form,
        "editor": "form",
        "mode": "write",
        "/kind": "remote",
        "/value#type": "boolean",
        "/value": "no",
    }
    assert client.post(f"/runs/{run.run_id}/artifacts/", post).status_code == 302
    from runs.selectors.runs import run_state

    run.refresh_from_db()
    assert run_state(run).artifacts["rule"]["data"] == {"kind": "remote", "value": False}


def test_rules_toggle_reorder_and_validated_edit(client, bob, profile_run):
    from runs.selectors.runs import run_state

    login(client, bob)
    url = f"/runs/{profile_run.run_id}/rules/"
    page = client.get(url).content.decode()
    assert page.index('id="rule-r1"') < page.index('id="rule-r2"')
    client.post(url, {"rule_set": "filters", "rule": "r2", "op": "toggle"})
    client.post(url, {"rule_set": "filters", "rule": "r2", "op": "up"})
    bad = client.post(url, {"rule_set": "filters", "rule": "r1", "op": "edit", "payload": '{"kind": ""}'})
    assert (
        bad.status_code == 422
        and "value" in bad.content.decode()
        and 'aria-invalid="true"' in bad.content.decode()
    )
    good = client.post(
        url,
        {"rule_set": "filters", "rule": "r1", "op": "edit", "payload": '{"kind": "remote", "value": false}'},
    )
    assert good.status_code == 302
    profile_run.refresh_from_db()
    rules = {r["id"]: r for r in run_state(profile_run).rule_sets["filters"]["rules"]}
    assert rules["r2"]["enabled"] is True and rules["r2"]["priority"] > rules["r1"]["priority"]
    assert rules["r1"]["payload"] == {"kind": "remote", "value": False}
    page = client.get(url).content.decode()
    assert page.index('id="rule-r2"') < page.index('id="rule-r1"')


def test_run_and_workspace_ledgers(client, alice, make_run):
    make_run("run_l1")
    make_run("run_l2")
    login(client, alice)
    html = client.get("/runs/run_l1/ledger/").content.decode()
    assert "anthropic / claude-haiku" in html and "USD 0.0021" in html and "<svg" in html and "u-1" in html
    ws = client.get("/ledger/").content.decode()
    assert "2 runs" in ws and "USD 0.0042" in ws
    empty = client.get("/ledger/", {"from": "2001-01-01", "to": "2001-01-02"}).content.decode()
    assert "0 runs" in empty


def test_import_checks_then_imports(client, alice, run, other_workspace):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from runs.selectors.bundles import export_bundle_bytes

    data = export_bundle_bytes(run)
    login(client, alice)
    check = client.post("/import/", {"bundle": SimpleUploadedFile("b.json", data)})
    html = check.content.decode()
    assert check.status_code == 200 and html.count("passed") == 4 and "already exists" in html
    token = re.search(r'name="token" value="([^"]+)"', html).group(1)
    collide = client.post("/import/", {"confirm": "1", "token": token})
    assert collide.status_code == 409 and "RUN_ID_COLLISION" in collide.content.decode()
    done = client.post("/import/", {"confirm": "1", "token": token, "as_new_id": "1"})
    assert done.status_code == 302 and done["Location"].startswith("/runs/run")
    assert client.post("/import/", {"confirm": "1", "token": token}).status_code == 302  # token consumed
    tampered = data.replace(b'"nightly"', b'"weekly!"')
    bad = client.post("/import/", {"bundle": SimpleUploadedFile("t.json", tampered)})
    assert (
        bad.status_code == 422
        and "INTEGRITY_MISMATCH" in bad.content.decode()
        and "failed (mismatch)" in bad.content.decode()
    )
    junk = client.post("/import/", {"bundle": SimpleUploadedFile("j.json", b"{nope")})
    assert junk.status_code == 422 and "INVALID_JSON" in junk.content.decode()


def test_viewer_cannot_import(client, vera):
    from django.core.files.uploadedfile import SimpleUploadedFile

    login(client, vera)
    assert "Only owners" in client.get("/import/").content.decode()
    assert client.post("/import/", {"bundle": SimpleUploadedFile("b.json", b"{}")}).status_code == 403
