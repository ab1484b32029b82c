"""Send what the outbox holds: claim due rows, make one attempt each, record the outcome.

Attempts run concurrently, each on a thread of its own, inside the one task
(``runs.notifications.tasks.deliver_notifications``): a bounded pool per task rather than a task
per destination, because what must hold across tasks and workers (at most
``WORKBENCH_NOTIFY_PER_HOOK`` in flight to a hook and ``WORKBENCH_NOTIFY_PER_HOST`` to a host, each
hook's circuit breaker) lives in the outbox rows and is enforced where they are claimed
(``runs.actions.webhooks.claim_due``), which every backend and ``notify_worker --once`` share; a
task per destination would need a task row per hook kept unique, and would still queue behind
one another on a backend with one thread. Every attempt has a short connect timeout and a hard
deadline on its whole wall time (``runs.notifications.deadline``).

Webhooks and Slack go out over HTTP through the one egress guard
(``runs.providers.egress.GuardedTransport``: every address checked when the connection is made,
loopback / private / link-local / metadata refused unless ``WORKBENCH_EGRESS_ALLOW`` allows
them), and redirects are never followed (a redirect is a failed attempt). E-mail goes through
Django's e-mail backend, to people who may still see it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial

import httpx2
from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone

from runs.actions.gatelinks import issue_links, link_hours
from runs.actions.notify import schedule_deliveries
from runs.actions.outbox import (
    BUDGET_EXCEEDED,
    GATE_REQUESTED,
    HOOK_DISABLED,
    JUDGE_SUSPENDED,
    MONITOR_STATE_CHANGED,
    STARTER_EVENTS,
    TEST_EVENT,
)
from runs.actions.permissions import Action, role_allows
from runs.actions.webhooks import Outcome, claim_due, egress_message, record_attempt
from runs.models import Delivery, DeliveryChannel, Membership, SlackApp
from runs.notifications import messages, policy, slack
from runs.notifications.deadline import DeadlineBackend, deadline
from runs.notifications.signing import signed_headers
from runs.protocol.values import dumps, loads
from runs.providers import egress

log = logging.getLogger("workbench.notify")

USER_AGENT = "Workbench-Webhooks/1.0"
GIVEN_UP = "every attempt over about three days failed"
EXCERPT_BYTES = 4096  # of a receiver's answer: what is read of it (the excerpt keeps 200 characters)
POLL = 0.2  # seconds between looks at the outbox while attempts are in flight
GRACE = 2.0  # seconds past an attempt's deadline before the sender stops waiting for its thread
MAX_SECONDS = 300.0  # one task claims for this long at most, then hands over to the next one

_clients: dict[tuple, httpx2.Client] = {}
_clients_lock = threading.Lock()
_wakers: set[queue.SimpleQueue] = set()


def http_client() -> httpx2.Client:
    """One client per process (and per setting, for tests that change them), shared by the
    attempts' threads: the egress guard checks every address connected to, every connect, read
    and write waits at most the attempt's time left (``deadline``), redirects are not followed."""
    allow = egress.settings_allowance(settings, operator=False)  # hook URLs are typed by owners
    connect = float(settings.WORKBENCH_NOTIFY_CONNECT_TIMEOUT)
    read = float(settings.WORKBENCH_NOTIFY_READ_TIMEOUT)
    size = settings.WORKBENCH_NOTIFY_CONCURRENCY * 2
    key = (allow, connect, read, size)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            limits = httpx2.Limits(max_connections=size, max_keepalive_connections=size, keepalive_expiry=5.0)
            client = _clients[key] = httpx2.Client(
                transport=egress.GuardedTransport(allow, inner=DeadlineBackend(), limits=limits),
                timeout=httpx2.Timeout(connect=connect, read=read, write=read, pool=connect),
                follow_redirects=False,
                headers={"User-Agent": USER_AGENT},
            )
        return client


def wake() -> None:
    """New deliveries were committed: a sender of this process waiting on its attempts looks now."""
    for waker in list(_wakers):
        waker.put(None)


def _excerpt(response: httpx2.Response) -> str:
    try:
        head = b""
        for chunk in response.iter_bytes():
            head += chunk
            if len(head) >= EXCERPT_BYTES:
                break
        return head[:EXCERPT_BYTES].decode(response.encoding or "utf-8", "replace")[:200]
    except Exception:  # undecodable or cut off: keep nothing rather than fail the bookkeeping
        return ""


def _secrets(delivery: Delivery) -> list[str]:
    hook = delivery.webhook
    if hook is None:  # an e-mail delivery: nothing to sign
        return []
    out = [hook.secret]
    if hook.previous_secret and hook.previous_secret_until and hook.previous_secret_until > timezone.now():
        out.append(hook.previous_secret)
    return out


def _failure(
    delivery: Delivery, *, status: int | None, error: str, excerpt: str = "", retry_after=None
) -> Outcome:
    """A failed attempt: when to try again, or give up. A hook is given up on (disabled, its
    owners told) when one delivery failed every attempt of the schedule, or when the hook has
    failed without a success in between for as long as that schedule lasts: with its breaker
    open, its deliveries wait instead of using up their attempts, so the hook's streak decides."""
    delay = policy.retry_delay(delivery.attempts, status=status, retry_after=retry_after)
    hook = delivery.webhook
    now = timezone.now()
    streak = (now - hook.failing_since).total_seconds() if hook is not None and hook.failing_since else 0.0
    gives_up = delivery.webhook_id is not None and delivery.event_type != TEST_EVENT  # not for a test
    if delay is None:
        return Outcome(
            False, status, excerpt, error, retry_at=None, disable_hook=GIVEN_UP if gives_up else ""
        )
    if gives_up and policy.given_up(streak):
        return Outcome(False, status, excerpt, error, retry_at=None, disable_hook=GIVEN_UP)
    return Outcome(False, status, excerpt, error, retry_at=now + timedelta(seconds=delay))


def _timeout_words(exc: httpx2.TimeoutException, elapsed: float) -> str:
    limit = float(settings.WORKBENCH_NOTIFY_DEADLINE)
    if elapsed >= limit - 0.05:
        return f"timed out: no complete answer within {limit:g} s"
    if isinstance(exc, httpx2.ConnectTimeout):
        return f"timed out connecting ({float(settings.WORKBENCH_NOTIFY_CONNECT_TIMEOUT):g} s)"
    if isinstance(exc, httpx2.PoolTimeout):
        return "timed out waiting for a connection of the sender's pool"
    return f"timed out: nothing received for {float(settings.WORKBENCH_NOTIFY_READ_TIMEOUT):g} s"


def _post(delivery: Delivery, url: str, body: bytes, headers: dict[str, str]) -> Outcome:
    """One POST, on the attempt's own thread, within the attempt's deadline (no database here)."""
    started = time.monotonic()
    try:
        with deadline(float(settings.WORKBENCH_NOTIFY_DEADLINE)):
            with http_client().stream("POST", url, content=body, headers=headers) as response:
                excerpt = _excerpt(response)
    except egress.EgressRefused as exc:
        return _failure(delivery, status=None, error=f"{exc.code}: {egress_message(exc)}")
    except httpx2.TimeoutException as exc:
        return _failure(delivery, status=None, error=_timeout_words(exc, time.monotonic() - started))
    except httpx2.HTTPError as exc:
        refused = egress.refusal_in(exc)
        why = f"{refused.code}: {egress_message(refused)}" if refused else f"{type(exc).__name__}: {exc}"
        return _failure(delivery, status=None, error=why)
    verdict = policy.judge(response.status_code)
    if verdict.delivered:
        return Outcome(True, response.status_code, excerpt)
    if verdict.disable:
        return Outcome(False, response.status_code, excerpt, verdict.error, disable_hook=verdict.disable)
    retry_after = policy.parse_retry_after(response.headers.get("Retry-After"))
    return _failure(
        delivery, status=response.status_code, error=verdict.error, excerpt=excerpt, retry_after=retry_after
    )


def _may_receive(delivery: Delivery) -> bool:
    """An e-mail goes only to someone who may still see it: a gate to those who may decide it."""
    user = delivery.recipient
    if user is None or not user.is_active or not user.email:
        return False
    role = (
        Membership.objects.filter(user=user, workspace_id=delivery.workspace_id)
        .values_list("role", flat=True)
        .first()
    )
    if delivery.event_type in (GATE_REQUESTED, "gate.escalated"):  # escalation: runs.actions.gatepolicy
        return role_allows(role, Action.RESOLVE_GATE)
    if delivery.event_type == HOOK_DISABLED:
        return role_allows(role, Action.MANAGE_WEBHOOKS)
    if delivery.event_type == JUDGE_SUSPENDED:
        return role_allows(role, Action.MANAGE_JUDGES)
    if delivery.event_type == BUDGET_EXCEEDED:  # told to the owners, who set the cap
        return role_allows(role, Action.MANAGE_PROVIDERS)
    if delivery.event_type in STARTER_EVENTS or delivery.event_type == MONITOR_STATE_CHANGED:
        return role_allows(role, Action.VIEW_RUN)
    return False


def _mail(delivery: Delivery, subject: str, text: str, to: str) -> Outcome:
    """One e-mail, on the attempt's own thread (the mailer's ``EMAIL_TIMEOUT`` bounds the SMTP
    connection; the sender stops waiting for it at the deadline and its grace)."""
    try:
        send_mail(subject, text, settings.DEFAULT_FROM_EMAIL, [to])
    except Exception as exc:  # SMTP down, refused, timed out: try again later
        return _failure(delivery, status=None, error=f"{type(exc).__name__}: {exc}")
    return Outcome(True)


Work = Callable[[], Outcome]


def _hours_words(hours: float) -> str:
    if hours >= 1 and float(hours).is_integer():
        return f"{int(hours)} hour{'s' if hours != 1 else ''}"
    return f"{round(hours * 60)} minutes"


def prepare(delivery: Delivery) -> Outcome | Work:
    """On the sender's thread (which may read the database): the outcome at once when there is
    nothing to send any more, else the network part, to run on a thread of its own."""
    if delivery.channel == DeliveryChannel.EMAIL:
        if not _may_receive(delivery):
            return Outcome(False, error="the recipient may no longer receive it", cancelled=True)
        payload = loads(delivery.payload)
        links = issue_links(delivery, payload) if delivery.event_type == GATE_REQUESTED else None
        subject, text = messages.email_message(
            payload,
            site_name=getattr(settings, "WORKBENCH_SITE_NAME", "Workbench"),
            decision_links=(links.approve, links.reject) if links else None,
            links_valid_for=_hours_words(link_hours()),
        )
        recipient = delivery.recipient
        if recipient is None:  # _may_receive checked it; for the type checker
            return Outcome(False, error="the recipient is gone", cancelled=True)
        return partial(_mail, delivery, subject, text, recipient.email)
    hook = delivery.webhook
    if hook is None or not hook.enabled:
        return Outcome(False, error="the webhook is disabled", cancelled=True)
    app = SlackApp.objects.filter(webhook=hook).first() if delivery.channel == DeliveryChannel.SLACK else None
    if app is not None:  # a Slack app: its Web API with the bot token (runs.notifications.slack)
        app.webhook = hook
        return slack.prepare_app(delivery, app, _failure)
    if delivery.channel == DeliveryChannel.SLACK:
        body = dumps(messages.slack_message(loads(delivery.payload)))
        headers = {"Content-Type": "application/json"}
    else:
        body = delivery.payload
        headers = {
            "Content-Type": "application/json",
            **signed_headers(delivery.public_id, body, _secrets(delivery)),
        }
    return partial(_post, delivery, hook.url, body.encode(), headers)


@dataclass(eq=False)
class _InFlight:
    delivery: Delivery
    give_up_at: float  # time.monotonic(): the deadline and a grace; then the sender stops waiting


def _run(work: Work, item: _InFlight, results: queue.SimpleQueue) -> None:
    try:
        outcome = work()
    except Exception as exc:  # a bug must not wedge the sender: count it as a failure
        log.exception("delivery %s failed unexpectedly", item.delivery.public_id)
        outcome = _failure(item.delivery, status=None, error=f"internal error: {type(exc).__name__}")
    results.put((item, outcome))


def deliver_due(*, limit: int | None = None, max_seconds: float = MAX_SECONDS) -> int:
    """Claim and send what is due, up to ``limit`` attempts in flight at once (the setting
    ``WORKBENCH_NOTIFY_CONCURRENCY`` unless given), until nothing is due or in flight; returns
    how many attempts were made.

    This thread claims (the per-hook and per-host limits and the breakers are the claim's:
    ``claim_due``), prepares and records; each attempt's network part runs on a thread of its
    own, within its deadline. While attempts are in flight this thread looks at the outbox
    again whenever one ends, when this process commits new deliveries (``wake``) and every
    ``POLL`` seconds, so a delivery that comes in while others hang goes out at once. An attempt
    whose thread has not answered ``GRACE`` seconds after its deadline (a name lookup that
    hangs) is recorded as timed out and its thread forgotten. After ``max_seconds`` it claims
    nothing more, and asks for another task when deliveries are still due."""
    width = limit or settings.WORKBENCH_NOTIFY_CONCURRENCY
    budget = float(settings.WORKBENCH_NOTIFY_DEADLINE) + GRACE
    results: queue.SimpleQueue = queue.SimpleQueue()
    flying: dict[int, _InFlight] = {}
    made = 0
    claim_until = time.monotonic() + max_seconds
    http_client()  # made once per process (its TLS context takes a while): not on an attempt's time
    _wakers.add(results)
    try:
        while True:
            if time.monotonic() < claim_until and len(flying) < width:
                for delivery in claim_due(limit=width - len(flying)):
                    made += 1
                    work = prepare(delivery)
                    if isinstance(work, Outcome):
                        record_attempt(delivery, work)
                        continue
                    item = flying[delivery.pk] = _InFlight(delivery, time.monotonic() + budget)
                    threading.Thread(
                        target=_run, args=(work, item, results), name="workbench-delivery", daemon=True
                    ).start()
            if not flying:
                break
            _collect(results, flying, budget)
    finally:
        _wakers.discard(results)
    if time.monotonic() >= claim_until and Delivery.objects.due(timezone.now()).exists():
        schedule_deliveries()  # the next task goes on (this one has run long enough)
    return made


def _collect(
    results: queue.SimpleQueue[tuple[_InFlight, Outcome] | None], flying: dict[int, _InFlight], budget: float
) -> None:
    """Wait for an attempt to end (or a wake-up, or the poll), record what ended, give up on the
    attempts past their deadline and grace."""
    soonest = min(item.give_up_at for item in flying.values())
    try:
        got = results.get(timeout=max(0.0, min(POLL, soonest - time.monotonic())))
    except queue.Empty:
        got = None
    while got is not None:
        if isinstance(got, tuple):
            item, outcome = got
            if flying.get(item.delivery.pk) is item:
                del flying[item.delivery.pk]
                record_attempt(item.delivery, outcome)
        try:
            got = results.get_nowait()
        except queue.Empty:
            got = None
    now = time.monotonic()
    for pk, item in list(flying.items()):
        if now >= item.give_up_at:
            del flying[pk]
            words = f"timed out: no complete answer within {budget - GRACE:g} s"
            record_attempt(item.delivery, _failure(item.delivery, status=None, error=words))
