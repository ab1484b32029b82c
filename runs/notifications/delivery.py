"""Send what the outbox holds: claim due rows, make one attempt each, record the outcome.

Webhooks and Slack go out over HTTP through the one egress guard
(``runs.providers.egress.GuardedTransport``: every address checked when the connection is made,
loopback / private / link-local / metadata refused unless ``WORKBENCH_EGRESS_ALLOW`` allows
them), with explicit connect and read timeouts, and redirects are never followed (a redirect is
a failed attempt). E-mail goes through Django's e-mail backend, to people who may still see it.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import httpx2
from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone

from runs.actions.outbox import GATE_REQUESTED, HOOK_DISABLED, STARTER_EVENTS, TEST_EVENT
from runs.actions.permissions import Action, role_allows
from runs.actions.webhooks import Outcome, claim_due, egress_message, record_attempt
from runs.models import Delivery, DeliveryChannel, Membership
from runs.notifications import messages, policy
from runs.notifications.signing import signed_headers
from runs.protocol.values import dumps, loads
from runs.providers import egress

log = logging.getLogger("workbench.notify")

USER_AGENT = "Workbench-Webhooks/1.0"
GIVEN_UP = "every attempt over about three days failed"


def http_client() -> httpx2.Client:
    timeout = httpx2.Timeout(
        connect=float(settings.WORKBENCH_NOTIFY_CONNECT_TIMEOUT),
        read=float(settings.WORKBENCH_NOTIFY_READ_TIMEOUT),
        write=float(settings.WORKBENCH_NOTIFY_READ_TIMEOUT),
        pool=float(settings.WORKBENCH_NOTIFY_CONNECT_TIMEOUT),
    )
    return httpx2.Client(
        # Hook URLs are typed by workspace owners: the operator's allowance only.
        transport=egress.GuardedTransport(egress.settings_allowance(settings, operator=False)),
        timeout=timeout,
        follow_redirects=False,
        headers={"User-Agent": USER_AGENT},
    )


def _excerpt(response: httpx2.Response) -> str:
    try:
        return response.text[:200]
    except Exception:  # undecodable bytes: keep nothing rather than fail the bookkeeping
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
    delay = policy.retry_delay(delivery.attempts, status=status, retry_after=retry_after)
    if delay is None:
        disable = GIVEN_UP if delivery.webhook_id is not None and delivery.event_type != TEST_EVENT else ""
        return Outcome(False, status, excerpt, error, retry_at=None, disable_hook=disable)
    return Outcome(False, status, excerpt, error, retry_at=timezone.now() + timedelta(seconds=delay))


def _post(client: httpx2.Client, delivery: Delivery) -> Outcome:
    hook = delivery.webhook
    if hook is None or not hook.enabled:
        return Outcome(False, error="the webhook is disabled", cancelled=True)
    if delivery.channel == DeliveryChannel.SLACK:
        body = dumps(messages.slack_message(loads(delivery.payload)))
        headers = {"Content-Type": "application/json"}
    else:
        body = delivery.payload
        headers = {
            "Content-Type": "application/json",
            **signed_headers(delivery.public_id, body, _secrets(delivery)),
        }
    try:
        response = client.post(hook.url, content=body.encode(), headers=headers)
    except egress.EgressRefused as exc:
        return _failure(delivery, status=None, error=f"{exc.code}: {egress_message(exc)}")
    except httpx2.HTTPError as exc:
        refused = egress.refusal_in(exc)
        why = f"{refused.code}: {egress_message(refused)}" if refused else f"{type(exc).__name__}: {exc}"
        return _failure(delivery, status=None, error=why)
    verdict = policy.judge(response.status_code)
    excerpt = _excerpt(response)
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
    if delivery.event_type == GATE_REQUESTED:
        return role_allows(role, Action.RESOLVE_GATE)
    if delivery.event_type == HOOK_DISABLED:
        return role_allows(role, Action.MANAGE_WEBHOOKS)
    if delivery.event_type in STARTER_EVENTS:
        return role_allows(role, Action.VIEW_RUN)
    return False


def _mail(delivery: Delivery) -> Outcome:
    recipient = delivery.recipient
    if recipient is None or not _may_receive(delivery):
        return Outcome(False, error="the recipient may no longer receive it", cancelled=True)
    subject, text = messages.email_message(
        loads(delivery.payload), site_name=getattr(settings, "WORKBENCH_SITE_NAME", "Workbench")
    )
    try:
        send_mail(subject, text, settings.DEFAULT_FROM_EMAIL, [recipient.email])
    except Exception as exc:  # SMTP down, refused, timed out: try again later
        return _failure(delivery, status=None, error=f"{type(exc).__name__}: {exc}")
    return Outcome(True)


def attempt(client: httpx2.Client, delivery: Delivery) -> Outcome:
    if delivery.channel == DeliveryChannel.EMAIL:
        return _mail(delivery)
    return _post(client, delivery)


def deliver_due(*, limit: int = 20, max_rounds: int = 50) -> int:
    """Claim and send what is due now, batch after batch; returns how many attempts were made."""
    made = 0
    with http_client() as client:
        for _ in range(max_rounds):
            batch = claim_due(limit=limit)
            if not batch:
                break
            for delivery in batch:
                try:
                    outcome = attempt(client, delivery)
                except Exception as exc:  # a bug must not wedge the queue: count it as a failure
                    log.exception("delivery %s failed unexpectedly", delivery.public_id)
                    outcome = _failure(delivery, status=None, error=f"internal error: {type(exc).__name__}")
                record_attempt(delivery, outcome)
                made += 1
    return made
