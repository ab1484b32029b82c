"""Slack apps through the official ``slack_sdk``: the Web API client (``chat.postMessage``,
``chat.update``, ``chat.postEphemeral``, ``views.open``, ``users.info``) at the operator's
``WORKBENCH_SLACK_API_URL``, and the delivery of the outbox's messages to a Slack app hook:

* ``gate.requested``: the gate message with its buttons (runs.notifications.slack_blocks); its
  ``channel`` and ``ts`` are remembered when the attempt is recorded;
* ``gate.resolved``: that message updated in place (who decided, how, where);
* ``run.completed`` / ``run.failed`` / ``run.cancelled`` / ``run.diverged``: said in the gate
  message's thread (``thread_ts``), or in the channel when the run posted no gate message.

Network work runs on the attempt's own thread (no database); what it needs of the database is
read by :func:`prepare_app` on the sender's thread.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from django.conf import settings
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from runs.actions.outbox import GATE_REQUESTED, GATE_RESOLVED
from runs.actions.slack import remember_gate_message
from runs.actions.webhooks import Outcome
from runs.models import Delivery, SlackApp, SlackGateMessage
from runs.notifications import slack_blocks
from runs.protocol.values import loads

log = logging.getLogger("workbench.notify")


def _obj(value: object) -> dict:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


# Slack's answers that no retry will change: the app's token or channel is wrong.
FATAL = frozenset(
    {"invalid_auth", "account_inactive", "token_revoked", "not_authed", "channel_not_found", "is_archived"}
)


def client(token: str) -> WebClient:
    return WebClient(
        token=token,
        base_url=settings.WORKBENCH_SLACK_API_URL,
        timeout=max(1, int(float(settings.WORKBENCH_NOTIFY_DEADLINE))),
    )


def _who(actor: object) -> str:
    text = str(actor or "someone")
    return text.split(":", 1)[1] if text.startswith("user:") else text


def prepare_app(delivery: Delivery, app: SlackApp, failure) -> Outcome | Any:
    """The network part of one delivery to a Slack app (``failure(delivery, status=, error=,
    retry_after=)`` makes a failed outcome with the retry schedule)."""
    message = loads(delivery.payload)
    data = message.get("data") or {}
    gate = _obj(data.get("gate"))
    run = _obj(data.get("run"))
    hook = app.webhook
    if delivery.event_type == GATE_REQUESTED:
        body = slack_blocks.gate_message(message, hook.public_id)
        ref = slack_blocks.gate_ref(hook.public_id, data)
        return partial(
            _send, delivery, app.bot_token, "post", {"channel": app.channel_id, **body}, ref, failure
        )
    posted = SlackGateMessage.objects.filter(webhook=hook, run_id=str(run.get("id") or "")).order_by("-id")
    if delivery.event_type == GATE_RESOLVED:
        mine_q = posted.filter(step_id=str(gate.get("stepId") or ""), gate=str(gate.get("gate") or ""))
        if (
            gate.get("checkpoint") is not None
        ):  # (gate.resolved names no checkpoint: the latest of the step's gate)
            mine_q = mine_q.filter(checkpoint=str(gate["checkpoint"]))
        mine = mine_q.first()
        body = slack_blocks.decided_message(message, _who(gate.get("decidedBy")))
        if mine is not None:
            args = {"channel": mine.channel_id, "ts": mine.ts, **body}
            return partial(_send, delivery, app.bot_token, "update", args, None, failure)
        return partial(
            _send, delivery, app.bot_token, "post", {"channel": app.channel_id, **body}, None, failure
        )
    first = posted.last()  # the run's first gate message holds the thread
    body = slack_blocks.thread_reply(message)
    args = (
        {"channel": first.channel_id, "thread_ts": first.ts, **body}
        if first
        else {"channel": app.channel_id, **body}
    )
    return partial(_send, delivery, app.bot_token, "post", args, None, failure)


def _send(delivery: Delivery, token: str, what: str, args: dict, ref: dict | None, failure) -> Outcome:
    web = client(token)
    try:
        answer = web.chat_update(**args) if what == "update" else web.chat_postMessage(**args)
    except SlackApiError as exc:
        status = exc.response.status_code
        error = str(exc.response.get("error") or "error")
        if status == 429:
            retry = exc.response.headers.get("Retry-After") or exc.response.headers.get("retry-after")
            return failure(
                delivery, status=429, error="Slack: rate limited", retry_after=float(retry) if retry else None
            )
        if error in FATAL:
            return Outcome(False, status, "", f"Slack: {error}", disable_hook=f"Slack answered {error}")
        return failure(delivery, status=status if status >= 400 else None, error=f"Slack: {error}")
    except (SlackClientError, OSError) as exc:
        return failure(delivery, status=None, error=f"{type(exc).__name__}: {exc}")
    if ref is None or delivery.webhook_id is None:
        return Outcome(True, answer.status_code)
    hook_pk, channel_id, ts = (
        delivery.webhook_id,
        str(answer.get("channel") or args["channel"]),
        str(answer.get("ts") or ""),
    )
    return Outcome(
        True,
        answer.status_code,
        after=partial(remember_gate_message, hook_pk=hook_pk, ref=ref, channel_id=channel_id, ts=ts),
    )


# ------------------------------------------------------------------ answers to an interaction


def ephemeral(app: SlackApp, *, channel: str | None, user: str, text: str) -> None:
    """A refusal only that Slack user sees; never fails the request that answers Slack."""
    if not channel:
        return
    try:
        client(app.bot_token).chat_postEphemeral(channel=channel, user=user, text=text)
    except (SlackClientError, OSError):
        log.warning("could not tell a Slack user why nothing was decided", exc_info=True)


def open_note_modal(app: SlackApp, *, trigger_id: str, value: str) -> bool:
    try:
        client(app.bot_token).views_open(trigger_id=trigger_id, view=slack_blocks.note_modal(value))
    except (SlackClientError, OSError):
        log.warning("could not open the Slack note modal", exc_info=True)
        return False
    return True


def slack_email(app: SlackApp, slack_user_id: str) -> str | None:
    """The Slack user's e-mail (users.info, the ``users:read.email`` scope), or None."""
    try:
        answer = client(app.bot_token).users_info(user=slack_user_id)
    except (SlackClientError, OSError):
        return None
    profile = (answer.get("user") or {}).get("profile") or {}
    email = profile.get("email")
    return email if isinstance(email, str) and "@" in email else None
