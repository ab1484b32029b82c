"""Playground JSON endpoints and websocket messages write numbers as JavaScript does (runs.web.wire)."""

from __future__ import annotations

import pytest

from playground.models import Execution
from tests.api.test_wire import JS_NUMBERS, NUMBERS

pytestmark = pytest.mark.django_db


def _execution(workspace, **fields) -> Execution:
    return Execution.objects.create(
        workspace=workspace,
        provider_kind="openai",
        model_name="m",
        status="completed",
        request="{}",
        user_content="[]",
        **fields,
    )


def test_execution_detail_spells_numbers_as_javascript(client, alice, workspace):
    ex = _execution(workspace, structured_output={"values": NUMBERS}, usage={"input_tokens": 3})
    client.force_login(alice)
    body = client.get(f"/playground/executions/{ex.pk}/").content
    assert b'"structured_output":{"values":' + JS_NUMBERS + b"}" in body
    assert b"1e-06" not in body and b"-0.0" not in body and b"e+19" not in body


def test_errors_keep_their_member_order(client, alice, workspace):
    client.force_login(alice)
    response = client.post("/playground/preview/", b"[1", content_type="application/json")
    assert response.status_code == 400
    assert response.content.startswith(b'{"error":{"field":"body","message":')


@pytest.mark.asyncio
async def test_websocket_messages_use_the_wire_writer():
    from playground.consumers import ExecutionConsumer

    assert await ExecutionConsumer.encode_json({"n": NUMBERS}) == '{"n":' + JS_NUMBERS.decode() + "}"
