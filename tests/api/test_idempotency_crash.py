"""Idempotency survives a crash: the key is recorded in the same transaction as the write, and a
run refuses an event id it already holds (DUPLICATE_EVENT_ID)."""

from __future__ import annotations

import pytest
from workbench_sdk.client import make_event

from accounts import idempotency
from accounts.models import IdempotencyRecord
from runs.models import Event


class Killed(BaseException):
    """Stands in for the process dying: nothing after it runs, no handler catches it."""


def _events(run_id: str, n: int) -> list[dict]:
    return [make_event(run_id, "annotation", text=f"n{i}") for i in range(n)]


def test_a_crash_between_the_write_and_the_key_record_leaves_nothing(api, started_run, monkeypatch):
    batch = {"events": _events(started_run, 50)}
    headers = {"Idempotency-Key": "crash-1"}

    def die(record, response):
        raise Killed

    with monkeypatch.context() as m:
        m.setattr(idempotency, "finish", die)
        with pytest.raises(Killed):
            api.post(f"/api/runs/{started_run}/events", batch, headers=headers)
    # The events and the reservation went together: nothing is stored, the key is free.
    assert Event.objects.filter(run__run_id=started_run).count() == 0
    assert not IdempotencyRecord.objects.filter(key="crash-1").exists()
    retry = api.post(f"/api/runs/{started_run}/events", batch, headers=headers)
    assert retry.status_code == 200, retry.content  # not 409 "still being processed"
    again = api.post(f"/api/runs/{started_run}/events", batch, headers=headers)
    assert again.status_code == 200 and again["Idempotent-Replayed"] == "true"
    seqs = list(Event.objects.filter(run__run_id=started_run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, 51))  # landed once, gapless


def test_a_retry_without_the_key_is_refused_by_event_id(api, started_run):
    batch = {"events": _events(started_run, 3)}
    assert api.post(f"/api/runs/{started_run}/events", batch).status_code == 200
    retry = api.post(f"/api/runs/{started_run}/events", batch)
    assert retry.status_code == 409 and retry.json()["code"] == "DUPLICATE_EVENT_ID"
    assert Event.objects.filter(run__run_id=started_run).count() == 3


def test_duplicate_ids_inside_one_batch_are_refused(api, started_run):
    event = make_event(started_run, "annotation", text="x")
    response = api.post(f"/api/runs/{started_run}/events", {"events": [event, dict(event)]})
    assert response.status_code == 409 and response.json()["code"] == "DUPLICATE_EVENT_ID"
    assert Event.objects.filter(run__run_id=started_run).count() == 0


def test_server_errors_roll_the_keyed_write_back(api, started_run, monkeypatch):
    """A 5xx after the write is not stored and its write does not stay: the retry runs once."""
    from runs.actions import runs as actions

    real = actions.update_projection

    def broken(run, state):
        real(run, state)
        raise RuntimeError("disk on fire")

    batch = {"events": _events(started_run, 2)}
    headers = {"Idempotency-Key": "crash-2"}
    with monkeypatch.context() as m:
        m.setattr(actions, "update_projection", broken)
        assert api.post(f"/api/runs/{started_run}/events", batch, headers=headers).status_code == 500
    assert Event.objects.filter(run__run_id=started_run).count() == 0
    assert api.post(f"/api/runs/{started_run}/events", batch, headers=headers).status_code == 200
    assert Event.objects.filter(run__run_id=started_run).count() == 2
