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
