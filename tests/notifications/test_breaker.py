"""The per-hook circuit breaker: opens after N failures in a row, its hook's deliveries wait (none
is failed for it), a half-open probe after a cooldown that doubles, closed by a success; the
per-hook and per-host limits of deliveries in flight; the hard deadline of one attempt."""

from __future__ import annotations

import socket
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from runs.actions.webhooks import do_send_test_event, do_set_webhook_enabled
from runs.models import Delivery, Webhook
from runs.notifications import policy
from runs.notifications.delivery import GIVEN_UP, deliver_due
from tests.fakes.webhook_receiver import Answer, Receiver
from tests.notifications.conftest import make_hook

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def _breaker(hook: Webhook, n: int, now: datetime, **kw) -> list[bool]:
    return [
        hook.breaker_failed("timed out", now=now, threshold=5, cooldown=30, max_cooldown=3600, jitter=0, **kw)
        for _ in range(n)
    ]


def test_breaker_opens_half_opens_and_closes_without_a_database():
    hook = Webhook()
    assert hook.breaker_state(T0) == "closed"
    assert _breaker(hook, 4, T0) == [False] * 4 and hook.breaker_state(T0) == "closed"
    assert _breaker(hook, 1, T0) == [True]  # the fifth failure in a row opens it
    assert hook.breaker_state(T0) == "open" and hook.backoff_until == T0 + timedelta(seconds=30)
    assert (hook.consecutive_failures, hook.failing_since, hook.last_failure) == (5, T0, "timed out")
    # an attempt already under way fails too: the cooldown stays as it was
    assert _breaker(hook, 1, T0 + timedelta(seconds=1)) == [False]
    assert hook.backoff_until == T0 + timedelta(seconds=30)
    later = T0 + timedelta(seconds=31)
    assert hook.breaker_state(later) == "half-open"
    assert _breaker(hook, 1, later) == [True]  # the probe failed: open again, twice as long
    assert hook.backoff_until == later + timedelta(seconds=60) and hook.backoffs == 2
    much_later = later + timedelta(seconds=61)
    _breaker(hook, 1, much_later)
    assert hook.backoff_until == much_later + timedelta(seconds=120)
    for _ in range(20):  # the cooldown grows up to its cap
        hook.backoff_until = T0
        _breaker(hook, 1, T0 + timedelta(seconds=1))
    assert hook.backoff_until == T0 + timedelta(seconds=1 + 3600)
    hook.breaker_succeeded()
    assert hook.breaker_state(T0) == "closed"
    assert (hook.consecutive_failures, hook.failing_since, hook.backoffs, hook.last_failure) == (
        0,
        None,
        0,
        "",
    )


def _time_passes():
    """Every pending delivery is due and every cooldown over (the clock is not mocked: rows move)."""
    now = timezone.now()
    Delivery.objects.filter(status="pending").update(next_attempt_at=now)
    Webhook.objects.filter(backoff_until__isnull=False).update(backoff_until=now)


@pytest.mark.django_db
def test_a_failing_hook_is_backed_off_its_deliveries_wait_a_probe_closes_it(workspace):
    status = {"code": 500}
    with Receiver(lambda hit: Answer(status["code"])) as rx:
        hook = make_hook(workspace, rx.url).webhook
        for _ in range(8):
            do_send_test_event(workspace=workspace, webhook_id=hook.public_id)
        made = deliver_due()
        hook.refresh_from_db()
        assert hook.breaker_state() == "open" and hook.enabled
        assert 5 <= hook.consecutive_failures == made == len(rx.hits) <= 6  # 2 were in flight at most
        assert "500" in hook.last_failure
        waiting = Delivery.objects.filter(webhook=hook, attempts=0)
        assert waiting.count() == 8 - made
        assert {d.status for d in Delivery.objects.all()} == {"pending"}  # none failed for the breaker
        assert all(d.next_attempt_at >= hook.backoff_until for d in Delivery.objects.all())
        assert deliver_due() == 0  # open: nothing goes to it

        _time_passes()  # half-open: one delivery probes, and fails
        assert deliver_due() == 1 and len(rx.hits) == made + 1
        hook.refresh_from_db()
        assert hook.breaker_state() == "open" and hook.backoffs == 2
        wait = (hook.backoff_until - timezone.now()).total_seconds()
        assert 2 * 30 * 0.85 < wait <= 2 * 30 * 1.1  # twice the first cooldown (jitter 10 %)

        _time_passes()
        status["code"] = 200  # the receiver is fixed: the probe closes the breaker, the rest go out
        assert deliver_due() == 8
        hook.refresh_from_db()
        assert hook.breaker_state() == "closed" and hook.consecutive_failures == 0
        assert set(Delivery.objects.values_list("status", flat=True)) == {"delivered"}
        ids = [h.headers["webhook-id"] for h in rx.hits]
        assert set(ids) == set(Delivery.objects.values_list("public_id", flat=True))  # same ids again


@pytest.mark.django_db
def test_a_test_event_probes_an_open_hook_at_once_and_enabling_resets_it(workspace):
    with Receiver(lambda hit: Answer(503)) as rx:
        hook = make_hook(workspace, rx.url).webhook
        for _ in range(5):
            do_send_test_event(workspace=workspace, webhook_id=hook.public_id)
        deliver_due()
        hook.refresh_from_db()
        assert hook.breaker_state() == "open"
        rx.answer = lambda hit: Answer(200)
        probe = do_send_test_event(workspace=workspace, webhook_id=hook.public_id)  # the owner's check
        assert deliver_due() == 1  # the test event alone: the others wait for the cooldown
        assert rx.hits[-1].headers["webhook-id"] == probe.public_id
        hook.refresh_from_db()
        assert hook.breaker_state() == "closed"
    hook.breaker_failed("x", threshold=1)
    hook.save()
    do_set_webhook_enabled(workspace=workspace, webhook_id=hook.public_id, enabled=False)
    do_set_webhook_enabled(workspace=workspace, webhook_id=hook.public_id, enabled=True)
    hook.refresh_from_db()
    assert hook.breaker_state() == "closed" and hook.consecutive_failures == 0


@pytest.mark.django_db
def test_a_hook_failing_for_three_days_is_given_up_whatever_its_breaker(workspace, started_run):
    from tests.notifications.conftest import bring_review_gate

    with Receiver(lambda hit: Answer(500)) as rx:
        hook = make_hook(workspace, rx.url).webhook
        bring_review_gate(workspace)
        Webhook.objects.filter(pk=hook.pk).update(
            consecutive_failures=40,
            failing_since=timezone.now() - timedelta(seconds=policy.GIVE_UP_AFTER + 1),
            backoff_until=timezone.now(),  # half-open: this is the probe
            backoffs=8,
        )
        assert deliver_due() == 1
        assert len(rx.hits) == 1
    hook.refresh_from_db()
    assert not hook.enabled and hook.disabled_reason == GIVEN_UP
    assert Delivery.objects.get(webhook=hook).status == "failed"


def _overlap(hits, hold: float) -> int:
    return max(sum(1 for other in hits if hit.at <= other.at < hit.at + hold) for hit in hits)


@pytest.mark.django_db
def test_at_most_two_in_flight_per_hook_and_the_host_limit(settings, workspace):
    settings.WORKBENCH_NOTIFY_PER_HOST = 3
    hold = 0.6
    with Receiver(lambda hit: Answer(200, delay=hold), path="/") as rx:
        hooks = [make_hook(workspace, f"{rx.url}h{i}").webhook for i in range(3)]
        for hook in hooks:
            for _ in range(4):
                do_send_test_event(workspace=workspace, webhook_id=hook.public_id)
        assert deliver_due() == 12
    assert _overlap(rx.hits, hold * 0.9) == 3  # the host's limit, used
    for i in range(3):
        assert _overlap([h for h in rx.hits if h.path == f"/h{i}"], hold * 0.9) <= 2
    assert set(Delivery.objects.values_list("status", flat=True)) == {"delivered"}


class Trickler:
    """Answers one header byte every 0.2 s and never ends its headers: no read ever times out."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.closing = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"

    def _serve(self) -> None:
        while not self.closing.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            try:
                conn.sendall(b"HTTP/1.1 200 OK\r\n")
                while not self.closing.wait(0.2):
                    conn.sendall(b"x")
            except OSError:
                pass

    def close(self) -> None:
        self.closing.set()
        self.sock.close()


@pytest.mark.django_db
def test_a_trickling_receiver_is_cut_off_at_the_deadline(settings, workspace):
    settings.WORKBENCH_NOTIFY_READ_TIMEOUT = 1
    settings.WORKBENCH_NOTIFY_DEADLINE = 1.5
    trickler = Trickler()
    try:
        hook = make_hook(workspace, trickler.url).webhook
        do_send_test_event(workspace=workspace, webhook_id=hook.public_id)
        started = time.monotonic()
        assert deliver_due() == 1
        took = time.monotonic() - started
    finally:
        trickler.close()
    delivery = Delivery.objects.get()
    assert delivery.status == "pending" and delivery.error == "timed out: no complete answer within 1.5 s"
    assert 1.4 < took < 1.5 + 2.0  # bounded by the deadline, never by the trickle (it never ends)
