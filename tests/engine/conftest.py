from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from runs.engine import Context, RunState, apply_event, decide, new_run
from runs.protocol.schemas import default_registry


class FakeClock:
    def __init__(self) -> None:
        self.t = datetime(2026, 3, 1, 20, 0, 0, tzinfo=UTC)

    def __call__(self) -> str:
        self.t += timedelta(milliseconds=7)
        return self.t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.t.microsecond // 1000:03d}Z"


def make_ctx() -> Context:
    counter = itertools.count(1)
    return Context(
        now=FakeClock(), new_id=lambda prefix: f"{prefix}_{next(counter):04d}", schemas=default_registry()
    )


@pytest.fixture
def ctx() -> Context:
    return make_ctx()


GATED = {
    "id": "wf-gates",
    "version": 2,
    "steps": [
        {"id": "intake", "gatePolicy": "PAUSE_BEFORE"},
        {"id": "draft", "gatePolicy": "PAUSE_AFTER"},
        {"id": "review", "gatePolicy": "CHECKPOINT"},
        {"id": "publish"},
    ],
    "edges": [
        {"id": "g1", "from": "intake", "to": "draft"},
        {"id": "g2", "from": "draft", "to": "review"},
        {"id": "g3", "from": "review", "to": "publish"},
    ],
}

DIAMOND = {
    "id": "wf-diamond",
    "version": 0,
    "steps": [{"id": "a"}, {"id": "b"}, {"id": "c"}, {"id": "d"}],
    "edges": [
        {"id": "ab", "from": "a", "to": "b"},
        {"id": "ac", "from": "a", "to": "c"},
        {"id": "bd", "from": "b", "to": "d"},
        {"id": "cd", "from": "c", "to": "d"},
    ],
}


class Driver:
    """Runs commands the way the actions layer does: decide, then apply each event."""

    def __init__(self, state: RunState, ctx: Context) -> None:
        self.state = state
        self.ctx = ctx
        self.trace: list[dict] = []

    def do(self, command) -> list[dict]:
        events = decide(self.state, command, self.ctx)
        for event in events:
            apply_event(self.state, event)
        self.trace.extend(events)
        return events


@pytest.fixture
def gated(ctx) -> Driver:
    return Driver(new_run(ctx=ctx, workflow=GATED, run_id="run_gated"), ctx)


@pytest.fixture
def diamond(ctx) -> Driver:
    return Driver(new_run(ctx=ctx, workflow=DIAMOND, run_id="run_diamond"), ctx)
