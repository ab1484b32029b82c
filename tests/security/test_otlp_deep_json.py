"""POST /v1/traces with JSON nested deeper than the protocol allows answers 400 with a code
(issue 23 §5: 10,000 nested arrays were a RecursionError, the only 500 of a fuzzing run)."""

from __future__ import annotations

import json

import pytest

from accounts.tokens import create_token
from runs import actions
from runs.models import Event
from runs.selectors.runs import get_run


@pytest.fixture
def auth(transactional_db, workspace, workflow):
    actions.do_start_run(workspace=workspace, workflow=workflow, actor="test", run_id="run_deep")
    secret = create_token(workspace=workspace, name="otel", scopes=["read", "write"]).secret
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}", "HTTP_X_WORKBENCH_RUN": "run_deep"}


def events(workspace) -> int:
    return Event.objects.filter(run=get_run(workspace, "run_deep")).count()


@pytest.mark.parametrize(
    "body",
    [
        "[" * 10_000 + "]" * 10_000,
        '{"resourceSpans": ' + "[" * 10_000 + "]" * 10_000 + "}",
        '{"a":' * 10_000 + "1" + "}" * 10_000,
    ],
    ids=["bare-arrays", "inside-resourceSpans", "objects"],
)
def test_deeply_nested_json_is_400_with_a_code(client, auth, workspace, body):
    before = events(workspace)
    r = client.post("/v1/traces", body, content_type="application/json", **auth)
    assert r.status_code == 400 and r.json()["code"] == "INVALID_INPUT"
    assert "deep" in r.json()["error"]
    assert events(workspace) == before


def test_deep_json_in_a_string_attribute_stays_text_and_nothing_fails(client, auth, workspace):
    deep = "[" * 10_000 + "]" * 10_000
    span = {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        "name": "execute_tool search",
        "kind": 1,
        "startTimeUnixNano": "1767225600000000000",
        "endTimeUnixNano": "1767225600250000000",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
            {"key": "gen_ai.tool.name", "value": {"stringValue": "search"}},
            {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": deep}},
        ],
    }
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})
    r = client.post("/v1/traces", body, content_type="application/json", **auth)
    assert r.status_code in (200, 400), r.content
    if r.status_code == 400:
        assert r.json()["code"]


@pytest.mark.parametrize(
    "span",
    [
        {"kind": 1, "startTimeUnixNano": "not a number"},
        {"attributes": [{"key": "k", "value": {"intValue": "x"}}]},
        {"attributes": ["not an object"]},
        {"status": "broken"},
    ],
)
def test_fields_of_the_wrong_shape_are_never_a_server_error(client, auth, workspace, span):
    """Fields of the wrong shape are skipped or refused with a code, never a 5xx."""
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})
    r = client.post("/v1/traces", body, content_type="application/json", **auth)
    assert r.status_code in (200, 400), r.content
    if r.status_code == 400:
        assert r.json()["code"]
