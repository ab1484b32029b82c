"""Webhooks of the caller's workspace: create (the secret is answered once), list, delete, the
delivery log, a retry. Owners (session) or tokens with the ``manage`` scope
(``Action.MANAGE_WEBHOOKS``); another workspace's hook answers 404 like a missing one."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from ninja import Query, Router, Schema
from ninja.responses import Status
from pydantic import Field

from runs.actions.permissions import Action
from runs.actions.webhooks import do_create_webhook, do_delete_webhook, do_retry_delivery
from runs.api.errors import ApiError
from runs.api.paging import NEXT_DOC, PageQuery, keyset, oldest
from runs.api.responses import require
from runs.api.schemas import ErrorOut
from runs.models import Delivery, Webhook
from runs.protocol.canonical import parse_json
from runs.protocol.errors import ErrorCode
from runs.selectors.webhooks import deliveries_page, get_webhook, webhooks_of

router = Router(tags=["webhooks"])

ERRORS = {
    400: ErrorOut,
    401: ErrorOut,
    403: ErrorOut,
    404: ErrorOut,
    409: ErrorOut,
    413: ErrorOut,
    429: ErrorOut,
}
FIELDS = frozenset({"url", "events", "description"})


class WebhookIn(Schema):
    url: str = Field(
        description="Where to POST (http or https; public addresses unless the operator allows others)."
    )
    events: list[str] = Field(
        description="Any of gate.requested, gate.resolved, run.completed, run.failed, run.cancelled, run.diverged, "
        "monitor.state_changed, judge.suspended, budget.exceeded."
    )
    description: str | None = Field(default=None, max_length=200)


class BreakerOut(Schema):
    state: str = Field(
        description="closed (deliveries go out), open (the receiver kept failing: its deliveries wait until "
        "backedOffUntil, none is failed for it) or half-open (one delivery probes the receiver; a success closes it)."
    )
    consecutiveFailures: int = Field(description="Failed attempts in a row, any delivery of the hook.")
    failingSince: str | None
    backedOffUntil: str | None = Field(description="When an open breaker lets one delivery probe.")
    lastError: str


class WebhookOut(Schema):
    id: str
    url: str
    events: list[str]
    description: str
    enabled: bool
    disabledReason: str
    createdAt: str
    breaker: BreakerOut


class WebhookCreated(WebhookOut):
    secret: str = Field(description="whsec_<base64>: shown once; verify webhook-signature with it.")


class DeliveryOut(Schema):
    id: str = Field(description="The message's webhook-id (the same on every retry).")
    eventType: str
    status: str = Field(description="pending, delivered, failed or cancelled.")
    attempts: int
    createdAt: str
    lastAttemptAt: str | None
    nextAttemptAt: str | None
    responseStatus: int | None
    responseExcerpt: str
    error: str


def _hook_json(hook: Webhook) -> dict:
    return {
        "id": hook.public_id,
        "url": hook.url,
        "events": list(hook.events),
        "description": hook.description,
        "enabled": hook.enabled,
        "disabledReason": hook.disabled_reason,
        "createdAt": hook.created_at.isoformat(),
        "breaker": {
            "state": hook.breaker_state(),
            "consecutiveFailures": hook.consecutive_failures,
            "failingSince": hook.failing_since.isoformat() if hook.failing_since else None,
            "backedOffUntil": hook.backoff_until.isoformat() if hook.backoff_until else None,
            "lastError": hook.last_failure,
        },
    }


def _delivery_json(delivery: Delivery, hook: Webhook | None = None) -> dict:
    pending = delivery.status == "pending"
    next_at = delivery.next_attempt_at
    until = hook.backoff_until if hook is not None and hook.backed_off else None
    if pending and until is not None and (next_at is None or until > next_at):
        next_at = until  # its hook is backed off: nothing goes before then
    return {
        "id": delivery.public_id,
        "eventType": delivery.event_type,
        "status": delivery.status,
        "attempts": delivery.attempts,
        "createdAt": delivery.created_at.isoformat(),
        "lastAttemptAt": delivery.last_attempt_at.isoformat() if delivery.last_attempt_at else None,
        "nextAttemptAt": next_at.isoformat() if pending else None,
        "responseStatus": delivery.response_status,
        "responseExcerpt": delivery.response_excerpt,
        "error": delivery.error,
    }


def _body(request: HttpRequest) -> dict:
    data = parse_json(request.body) if request.body else None
    if not isinstance(data, dict):
        raise ApiError(ErrorCode.INVALID_INPUT, "the body must be a JSON object with url and events")
    unknown = set(data) - FIELDS
    if unknown:
        raise ApiError(ErrorCode.INVALID_INPUT, f"unknown field(s): {', '.join(sorted(unknown))}")
    return data


@router.post(
    "",
    response={201: WebhookCreated, **ERRORS},
    summary="Create a webhook (its signing secret is answered once)",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/WebhookIn"}}},
        }
    },
)
def create_webhook(request: HttpRequest):
    caller = require(request, Action.MANAGE_WEBHOOKS)
    data = _body(request)
    created = do_create_webhook(
        workspace=caller.workspace,
        url=data.get("url"),
        events=data.get("events"),
        description=data.get("description") or "",
        actor=caller.actor,
    )
    return Status(201, {**_hook_json(created.webhook), "secret": created.secret})


@router.get(
    "",
    response={200: list[WebhookOut], **ERRORS},
    summary="List the workspace's webhooks, oldest first",
    description=NEXT_DOC,
)
def list_webhooks(request: HttpRequest, response: HttpResponse, page: Query[PageQuery]):
    caller = require(request, Action.MANAGE_WEBHOOKS)
    return [_hook_json(hook) for hook in oldest(request, response, webhooks_of(caller.workspace), page)]


@router.delete("/{webhook_id}", response={204: None, **ERRORS}, summary="Delete a webhook and its deliveries")
def delete_webhook(request: HttpRequest, webhook_id: str):
    caller = require(request, Action.MANAGE_WEBHOOKS)
    do_delete_webhook(workspace=caller.workspace, webhook_id=webhook_id)
    return HttpResponse(status=204)


@router.get(
    "/{webhook_id}/deliveries",
    response={200: list[DeliveryOut], **ERRORS},
    summary="The webhook's deliveries, newest first, 50 a page",
    description='The next (older) page, when there is one, is the `Link` header\'s `rel="next"` URL '
    "(`?cursor=...`); a cursor that does not parse answers 400 `INVALID_INPUT`.",
)
def list_deliveries(request: HttpRequest, response: HttpResponse, webhook_id: str, cursor: str = ""):
    caller = require(request, Action.MANAGE_WEBHOOKS)
    hook = get_webhook(caller.workspace, webhook_id)
    page = keyset(request, response, lambda: deliveries_page(hook, cursor=cursor))
    return [_delivery_json(d, hook) for d in page]


@router.post(
    "/{webhook_id}/deliveries/{delivery_id}/retry",
    response={202: DeliveryOut, **ERRORS},
    summary="Send a failed delivery again (same webhook-id, same body)",
)
def retry_delivery(request: HttpRequest, webhook_id: str, delivery_id: str):
    caller = require(request, Action.MANAGE_WEBHOOKS)
    delivery = do_retry_delivery(workspace=caller.workspace, webhook_id=webhook_id, delivery_id=delivery_id)
    return Status(202, _delivery_json(delivery))
