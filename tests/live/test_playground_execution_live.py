"""The playground's execution socket rides the runs' live path: woken by committed changes
through the channel layer (in-memory and Redis), not by polling the database."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

from tests.live.test_consumers import open_socket
from tests.playground.conftest import LOOPBACK

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def pending_execution(transactional_db, django_user_model, settings):
    from playground import compose as c
    from playground import execute
    from playground.models import ModelEntry, ProviderConfig
    from runs.actions.workspaces import add_member
    from runs.models import Workspace
    from tests.fakes.anthropic_api import FakeAnthropic

    # stored only (the suite's task backend runs nothing): the test runs the task's work itself
    settings.WORKBENCH_EGRESS_ALLOW = LOOPBACK  # the fake listens on 127.0.0.1
    with FakeAnthropic() as fake:
        fake.chunk_delay = 0.02
        ws = Workspace.objects.create(slug="ws-exec-live", name="Live")
        user = django_user_model.objects.create_user(username="lou", password="pw-123456789")
        add_member(ws, user, "owner")
        provider = ProviderConfig(
            workspace=ws, name="Fake", kind="anthropic", base_url=fake.url, max_retries=0
        )
        provider.set_api_key("test-anthropic-key")
        provider.save()
        entry = ModelEntry.objects.create(
            workspace=ws, provider=provider, model_id="claude-sonnet-4-6", display_name="S"
        )
        ex = execute.submit(
            workspace=ws,
            user=user,
            entry=entry,
            composition=c.compose(c.Session(prompt="one two three four five six"), entry.spec()),
        )
        yield user, ex.pk


async def test_socket_is_woken_by_commits_through_the_layer(
    channel_layer_kind, pending_execution, monkeypatch
):
    from django.db import close_old_connections

    from playground import consumers, execute

    user, execution_id = pending_execution
    reads = []
    original = consumers.load_execution

    def counted(pk):  # every read of the row by the socket
        reads.append(1)
        return original(pk)

    monkeypatch.setattr(consumers, "load_execution", counted)
    comm, connected, _ = await open_socket(f"/ws/playground/executions/{execution_id}/", user)
    assert connected
    assert await comm.receive_json_from(timeout=5) == {"type": "status", "status": "pending"}
    await asyncio.sleep(0.4)
    assert len(reads) == 1  # idle: no polling (the old socket read the row every 80-250 ms)

    def work():
        close_old_connections()
        try:
            execute.process(execution_id, "live-test-worker")
        finally:
            close_old_connections()

    worker = asyncio.get_running_loop().run_in_executor(None, work)
    seen = []
    while True:
        msg = await comm.receive_json_from(timeout=10)
        seen.append(msg)
        if msg["type"] == "done":
            break
    await worker
    await comm.disconnect()
    text = "".join(m["text"] for m in seen if m["type"] == "delta" and m["kind"] == "text")
    assert text == "Echo: one two three four five six"
    assert {"type": "status", "status": "processing"} in seen
    assert seen[-1]["state"]["status"] == "completed"
    assert 1 < len(reads) < 40  # one read per announced change, not per 80 ms
    await database_sync_to_async(close_old_connections)()
