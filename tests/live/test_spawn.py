"""runs.live.spawn: a task started beside its owner is held until it ends, and what it raised is
logged (not left as "Task exception was never retrieved"); cancel_all ends the owner's tasks."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from runs.live.publisher import LivePublisher
from runs.live.spawn import cancel_all, spawn


@pytest.mark.asyncio
async def test_a_failing_task_is_held_until_done_then_logged(caplog):
    tasks: set[asyncio.Task] = set()

    async def fails() -> None:
        await asyncio.sleep(0)
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="runs.live.spawn"):
        task = spawn(tasks, fails(), what="a test task")
        del task
        gc.collect()  # the owner's set holds it: it still runs
        assert len(tasks) == 1
        for _ in range(3):
            await asyncio.sleep(0)
    assert tasks == set()
    [record] = [r for r in caplog.records if r.name == "runs.live.spawn"]
    assert record.getMessage() == "live: a test task failed"
    assert isinstance(record.exc_info[1], RuntimeError)


@pytest.mark.asyncio
async def test_cancel_all_ends_the_tasks_and_logs_no_cancellation(caplog):
    tasks: set[asyncio.Task] = set()
    started = asyncio.Event()

    async def waits() -> None:
        started.set()
        await asyncio.Event().wait()

    with caplog.at_level(logging.ERROR, logger="runs.live.spawn"):
        task = spawn(tasks, waits(), what="a waiting task")
        await started.wait()
        await cancel_all(tasks)
    assert task.cancelled() and tasks == set()
    assert not [r for r in caplog.records if r.name == "runs.live.spawn"]


@pytest.mark.asyncio
async def test_the_publishers_drain_is_held_until_it_ends():
    publisher = LivePublisher()
    publisher.attach_loop(asyncio.get_running_loop())  # the drain runs in this loop
    assert publisher._drains == set()  # nobody asked: no drain
    publisher.submit_access_change(1)
    for _ in range(3):
        await asyncio.sleep(0)
    gc.collect()
    (drain,) = publisher._drains  # held by the publisher, not only weakly by the loop
    assert not drain.done()
    for _ in range(200):
        if not publisher._drains:
            break
        await asyncio.sleep(0.05)
    assert publisher._drains == set() and drain.done() and publisher.flush(0)
