"""Cancel of a running experiment (issue 47): it ends failed with "cancelled by <user>" at once,
its pending items never run, the fork of its running item is cancelled and its provider call
under way is shut; not one request reaches the provider after Cancel, counted at the loopback
fake. REST and the page's button; another workspace's experiment is a 404."""

from __future__ import annotations

import threading
import time

import pytest
from django.test import Client

from evals import actions
from evals.models import Experiment
from evals.runner import run_experiment
from runs.actions import ActionError
from runs.models import ForkStatus, Run, RunFork
from tests.api.conftest import BearerClient, _token


@pytest.fixture
def full_token(workspace) -> str:
    return _token(workspace, ["read", "write", "review"], "full")


@pytest.fixture
def read_token(workspace) -> str:
    return _token(workspace, ["read"], "reader")


@pytest.fixture
def outsider_token(other_workspace) -> str:
    return _token(other_workspace, ["read", "write", "review"], "outsider")


HAIKU = {"configurable": {"draftModel": "claude-haiku-4-5"}}  # one new provider call per item


def _wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _start(experiment: Experiment) -> threading.Thread:
    """The runner in a thread of its own (a worker's), on its own database connection."""
    from django.db import connection

    def run() -> None:
        try:
            run_experiment(experiment.pk)
        finally:
            connection.close()

    thread = threading.Thread(target=run, name="experiment-runner", daemon=True)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_cancel_mid_call_sends_nothing_more_to_the_provider(workspace, gate_dataset, fake):
    experiment = actions.do_create_experiment(
        workspace=workspace, dataset=gate_dataset, name="to cancel", change=HAIKU, actor="user:alice"
    )
    before = len(fake.requests)
    fake.script({"misbehave": "slow", "delay": 20})  # the first item's draft: no byte for 20 s
    thread = _start(experiment)
    _wait_for(lambda: len(fake.requests) == before + 1)  # the call is under way at the fake
    experiment = actions.do_cancel_experiment(Experiment.objects.get(pk=experiment.pk), actor="user:bob")
    at_cancel = len(fake.requests)
    assert experiment.status == "failed" and experiment.error == "CANCELLED: cancelled by bob"
    thread.join(timeout=60)
    assert not thread.is_alive()  # the shut call did not wait out its 20 s
    assert len(fake.requests) == at_cancel == before + 1  # nothing after Cancel
    experiment.refresh_from_db()
    assert experiment.status == "failed" and experiment.error == "CANCELLED: cancelled by bob"
    items = list(experiment.items.order_by("item_key"))
    assert [i.status for i in items] == ["failed"] * 3
    running, *pending = items
    assert running.error.startswith("CANCELLED: cancelled by bob") and running.provider_calls == 0
    assert all(i.error == "CANCELLED: cancelled by bob before this item ran" for i in pending)
    fork = RunFork.objects.get(run__run_id=running.run_id_text)
    assert fork.status == ForkStatus.FAILED and fork.error_code == "CANCELLED"
    assert Run.unscoped.get(pk=fork.run_id).status == "cancelled"
    assert RunFork.objects.filter(run__created_by=f"experiment:{experiment.public_id}").count() == 1
    assert experiment.summary["statuses"] == {"failed": 3}


@pytest.mark.django_db
def test_a_pending_experiment_cancelled_over_rest_never_starts(workspace, gate_dataset, fake, full_token):
    experiment = actions.do_create_experiment(
        workspace=workspace, dataset=gate_dataset, name="queued", change=HAIKU
    )
    api = BearerClient(full_token)
    response = api.post(f"/api/experiments/{experiment.public_id}/cancel")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "failed" and body["error"].startswith("CANCELLED: cancelled by ")
    assert body["progress"] == {"total": 3, "done": 3, "pending": 0, "running": 0}
    before = len(fake.requests)
    experiment = run_experiment(experiment.pk)  # its task runs later: nothing to do
    assert len(fake.requests) == before and experiment.status == "failed"
    assert experiment.error.startswith("CANCELLED:") and not RunFork.objects.exists()
    again = api.post(f"/api/experiments/{experiment.public_id}/cancel")
    assert again.status_code == 409 and again.json()["code"] == "CONFLICT"


@pytest.mark.django_db
def test_cancel_is_refused_to_readers_and_hidden_from_other_workspaces(
    workspace, gate_dataset, read_token, outsider_token
):
    experiment = actions.do_create_experiment(workspace=workspace, dataset=gate_dataset, name="x", change={})
    assert BearerClient(read_token).post(f"/api/experiments/{experiment.public_id}/cancel").status_code == 403
    outsider = BearerClient(outsider_token)
    theirs = outsider.post(f"/api/experiments/{experiment.public_id}/cancel")
    missing = outsider.post("/api/experiments/exp_00000000-0000-4000-8000-000000000000/cancel")
    assert theirs.status_code == missing.status_code == 404
    experiment.refresh_from_db()
    assert experiment.status == "pending"


@pytest.mark.django_db
def test_the_page_shows_progress_and_cancels(workspace, gate_dataset, alice, charlie):
    experiment = actions.do_create_experiment(workspace=workspace, dataset=gate_dataset, name="x", change={})
    client = Client()
    client.force_login(alice)
    url = f"/evals/experiments/{experiment.public_id}/"
    page = client.get(url).content.decode()
    assert "0 of 3 items finished" in page and "Cancel experiment" in page
    assert 'hx-trigger="every 2s"' in page
    fragment = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert fragment.strip().startswith('<section id="exp-status"') and "<h1>" not in fragment
    outsider = Client()
    outsider.force_login(charlie)
    assert outsider.post(f"{url}cancel/").status_code == 404
    response = client.post(f"{url}cancel/")
    assert response.status_code == 302 and response["Location"] == url
    experiment.refresh_from_db()
    assert experiment.status == "failed" and experiment.error == "CANCELLED: cancelled by alice"
    page = client.get(url).content.decode()
    assert 'Cancelled by alice. <code class="error-code">CANCELLED</code>' in page  # words, then the code
    assert "CANCELLED:" not in page and "Cancel experiment" not in page
    assert 'hx-trigger="every 2s"' not in page
    with pytest.raises(ActionError):
        actions.do_cancel_experiment(experiment, actor="user:alice")
