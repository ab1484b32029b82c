"""The runner's thread pool: two workers, each with its own database connection, outside the
single-transaction test database (the other evals tests run one worker in the test's transaction)."""

from __future__ import annotations

import threading

import pytest

from evals import actions, runner
from evals.runner import run_experiment


@pytest.mark.django_db(transaction=True)
def test_two_workers_run_every_item_on_their_own_connections(
    workspace, gate_dataset, fake, settings, monkeypatch
):
    settings.WORKBENCH_EXPERIMENT_CONCURRENCY = 2
    threads: set[str] = set()  # run_item wrapped to see which threads ran items
    original = runner.run_item

    def spy(experiment, row, **kw):
        threads.add(threading.current_thread().name)
        return original(experiment, row, **kw)

    monkeypatch.setattr(runner, "run_item", spy)
    before = len(fake.requests)
    experiment = actions.do_create_experiment(
        workspace=workspace, dataset=gate_dataset, name="pool", change={}
    )
    experiment = run_experiment(experiment.pk)
    assert experiment.status == "completed", experiment.error
    assert all(name.startswith("experiment") for name in threads) and threads
    items = list(experiment.items.all())
    assert [i.status for i in items] == ["completed"] * 3
    assert [i.score for i in items] == [1.0] * 3
    assert len(fake.requests) == before  # a replay: 0 provider requests, whichever thread ran it
    assert experiment.summary["cacheHits"] == 6
