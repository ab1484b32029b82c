from __future__ import annotations

import pytest

from runs.engine import programs
from runs.execution.host import Workbench
from tests.evals.pipeline import WORKFLOW, SupportPipeline
from tests.fakes.anthropic_api import FakeAnthropic


@pytest.fixture
def fake():
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def pipeline(fake, settings):
    settings.WORKBENCH_EGRESS_ALLOW = ["127.0.0.0/8", "::1/128"]  # the fake listens on loopback
    settings.WORKBENCH_REPLAY_EXECUTOR = "worker"  # the experiment runner runs the forks itself
    settings.WORKBENCH_EXPERIMENT_CONCURRENCY = 1  # one connection: the test's transaction
    program = SupportPipeline(fake.url)
    programs.register(WORKFLOW["id"], program)
    yield program
    programs.unregister(WORKFLOW["id"])


@pytest.fixture
def recorded(workspace, pipeline, fake):
    """Three runs, each decided at the draft's gate."""
    wb = Workbench(workspace=workspace, actor="pipeline")
    runs = [
        wb.run_workflow(workflow=WORKFLOW, metadata={"ticket": f"ticket {i}: my order is late"}).run
        for i in range(3)
    ]
    assert all(r.status == "completed" for r in runs)
    assert len(fake.requests) == 6
    return runs


@pytest.fixture
def gate_dataset(workspace, recorded):
    from evals import actions

    dataset = actions.do_create_dataset(workspace=workspace, name="draft gate", actor="user:alice")
    added, _ = actions.do_add_items(dataset=dataset, items=actions.items_from_gates(workspace, "draft"))
    assert added == 3
    return dataset
