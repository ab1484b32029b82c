"""The playground saves prompt versions ("Save as new version") and opens any version."""

from __future__ import annotations

import json

from playground import compose as c
from runs.selectors import prompts as sel
from tests.playground.test_views import post_json


def _initial(html: str) -> dict:
    marker = 'id="pg-initial" type="application/json">'
    start = html.index(marker) + len(marker)
    return json.loads(html[start : html.index("</script>", start)])


def test_save_as_new_version_and_open_any_version(client, bob, vera, workspace, fake_models):
    client.force_login(bob)
    one = c.session_to_json(
        c.Session(prompt="Rate {{thing}}", system_prompt="Judge", operation_type="rating")
    )
    first = post_json(
        client,
        "/playground/prompts/",
        {"session": one, "model": fake_models["sonnet"].pk, "name": "eval/rater"},
    )
    assert first.status_code == 200 and first.json()["version"] == 1
    two = c.session_to_json(
        c.Session(prompt="Rate {{thing}} from 1 to 5", system_prompt="Judge", operation_type="rating")
    )
    second = post_json(client, "/playground/prompts/", {"session": two, "name": "eval/rater"}).json()
    assert second["version"] == 2 and second["page"] == "/prompts/eval/rater/"
    v1 = sel.find_version(workspace, "eval/rater", version=1)
    assert v1.prompt.type == "chat" and v1.body_json[0] == {"role": "system", "content": "Judge"}
    assert (
        v1.config_json["model_entry"] == fake_models["sonnet"].pk
        and v1.config_json["operation_type"] == "rating"
    )

    opened = _initial(
        client.get("/playground/", {"prompt_name": "eval/rater", "version": "1"}).content.decode()
    )
    assert opened["session"]["prompt"] == "Rate {{thing}}" and opened["model"] == fake_models["sonnet"].pk
    assert opened["saved_prompt"] == {"name": "eval/rater", "version": 1}
    latest = _initial(client.get("/playground/", {"prompt_name": "eval/rater"}).content.decode())
    assert latest["session"]["prompt"] == "Rate {{thing}} from 1 to 5"
    page = client.get("/playground/").content.decode()
    assert "Save as new version" in page and "eval/rater" in page
    for params in (
        {"prompt_name": "eval/rater", "version": "9"},
        {"prompt_name": "nope"},
        {"prompt_name": "eval/rater", "version": "x"},
    ):
        assert client.get("/playground/", params).status_code == 404

    text = c.session_to_json(c.Session(prompt="plain"))
    post_json(client, "/playground/prompts/", {"session": text, "name": "plain"})
    refused = post_json(client, "/playground/prompts/", {"session": one, "name": "plain"})
    assert refused.status_code == 400 and "text prompt" in refused.json()["error"]["message"]
    bad = post_json(client, "/playground/prompts/", {"session": text, "name": "a//b"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "INVALID_INPUT"

    client.force_login(vera)
    assert post_json(client, "/playground/prompts/", {"session": text, "name": "plain"}).status_code == 403
    assert sel.find_version(workspace, "plain", label="latest").number == 1


def _send(client, session, **extra):
    return post_json(client, "/playground/send/", {"session": c.session_to_json(session), **extra})


def test_a_send_from_an_opened_version_records_it_on_its_model_call(
    client, bob, workspace, fake_models, django_capture_on_commit_callbacks
):
    from playground.models import Execution
    from runs.models import Event
    from runs.selectors.run_list import RunListFilters, runs_page

    client.force_login(bob)
    sonnet = fake_models["sonnet"].pk
    for text in ("Hello {{who}}", "Hi {{who}}"):
        post_json(
            client,
            "/playground/prompts/",
            {"session": c.session_to_json(c.Session(prompt=text)), "model": sonnet, "name": "greet"},
        )
    opened = {"name": "greet", "version": 2}
    with django_capture_on_commit_callbacks(execute=True):
        same = _send(client, c.Session(prompt="Hi {{who}}"), model=sonnet, prompt_version=opened)
        edited = _send(client, c.Session(prompt="Hi {{who}}!"), model=sonnet, prompt_version=opened)
        nothing = _send(client, c.Session(prompt="Hi {{who}}"), model=sonnet)
    ids = [r.json()["executions"][0]["id"] for r in (same, edited, nothing)]
    runs = [Execution.objects.get(pk=i).run_id for i in ids]
    assert Execution.objects.get(pk=ids[0]).flags["prompt"] == opened
    assert "prompt" not in Execution.objects.get(pk=ids[1]).flags  # edited: no longer version 2
    response = Event.objects.get(
        run__run_id=runs[0], type="model_io", body__contains='"direction":"response"'
    )
    assert response.data["payload"]["workbench.prompt"] == opened
    listed, _ = runs_page(workspace, RunListFilters(prompt="greet@2"))
    assert [r.run_id for r in listed] == [runs[0]]
    assert sel.cost_by_version(workspace, "greet")["rows"][0]["version"] == 2

    for bad, message in (
        ({"name": "greet", "version": 9}, "no such prompt version"),
        ({"name": "greet"}, "prompt_version is"),
        ("greet@2", "prompt_version is"),
    ):
        refused = _send(client, c.Session(prompt="Hi {{who}}"), model=sonnet, prompt_version=bad)
        assert refused.status_code == 400, bad
        error = refused.json()["error"]
        assert error["field"] == "prompt_version" and message in error["message"]
    assert Execution.objects.count() == 3  # nothing stored for a refused send


def test_another_workspaces_version_is_not_found(client, bob, charlie, other_workspace, fake_models):
    from runs.actions.permissions import ROLE_SCOPES
    from runs.actions.prompts import do_save_prompt_version

    do_save_prompt_version(
        other_workspace, name="theirs", body="x", scopes=ROLE_SCOPES["owner"], user=charlie
    )
    client.force_login(bob)
    refused = _send(client, c.Session(prompt="x"), prompt_version={"name": "theirs", "version": 1})
    assert refused.status_code == 400 and refused.json()["error"]["field"] == "prompt_version"
