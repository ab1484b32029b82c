"""The REST API (django-ninja): one NinjaAPI, its error handlers and its routers.

OpenAPI 3.1 is served at /api/openapi.json (public). Every error is
``{"error": message, "code": CODE}``.
"""

from __future__ import annotations

import logging

import orjson
from django.core.exceptions import RequestDataTooBig
from django.db import IntegrityError
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.openapi.docs import Swagger, _csrf_needed
from ninja.parser import Parser
from ninja.renderers import BaseRenderer

from accounts.idempotency import IdempotencyError
from accounts.principals import NotPermitted
from accounts.ratelimit import RateLimited
from runs.actions import ActionError
from runs.api import errors
from runs.api.auth import ReplayStored, TokenAuth, WorkspaceSessionAuth
from runs.api.budgets import router as budgets_router
from runs.api.budgets import runs_router as run_budget_router
from runs.api.bundles import router as bundles_router
from runs.api.bundles import runs_router as bundle_export_router
from runs.api.commands import router as commands_router
from runs.api.errors import ApiError
from runs.api.fork import cache_router
from runs.api.fork import router as fork_router
from runs.api.gatepolicy import router as gate_policy_router
from runs.api.gates import router as gates_router
from runs.api.ledger import router as ledger_router
from runs.api.ledger import runs_router as run_ledger_router
from runs.api.monitors import router as monitors_router
from runs.api.other_doors import with_other_doors
from runs.api.prices import router as prices_router
from runs.api.prompts import labels_router as prompt_labels_router
from runs.api.prompts import router as prompts_router
from runs.api.runstore import router as runstore_router
from runs.api.schemas import HealthOut
from runs.api.slack import router as slack_router
from runs.api.transcript import router as transcript_router
from runs.api.webhooks import router as webhooks_router
from runs.protocol.canonical import parse_json
from runs.protocol.errors import ErrorCode, ProtocolError
from runs.selectors.bundles import PROTOCOL_VERSION
from runs.selectors.monitors import MonitorNotFound
from runs.selectors.runs import RunNotFound
from runs.selectors.webhooks import WebhookNotFound
from runs.web.spool import BodyIncomplete
from runs.web.uploads import request_limit
from runs.web.wire import wire_json

logger = logging.getLogger("workbench.api")


class ProtocolJSONParser(Parser):
    """Request bodies are parsed with the protocol's number semantics (big integers as doubles)."""

    def parse_body(self, request: HttpRequest):
        return parse_json(request.body)


class JSONRenderer(BaseRenderer):
    """Every API body as JavaScript's JSON.stringify writes it (runs.protocol.canonical.wire_bytes):
    members in their order, numbers spelt as ECMAScript prints them."""

    media_type = "application/json"

    def render(self, request: HttpRequest, data, *, response_status: int) -> bytes:
        return wire_json(data)  # schema objects (pydantic models) and the like included


class ProjectSwagger(Swagger):
    """django-ninja's Swagger UI page rendered from templates/ninja/swagger.html with its files
    served as project static files (settings.STATICFILES_DIRS), so "ninja" need not be an
    installed app: that app would import all of django-ninja at the start of every command."""

    def render_page(self, request: HttpRequest, api, **kwargs) -> HttpResponse:
        from django.shortcuts import render

        self.settings["url"] = self.get_openapi_url(api, kwargs)
        context = {
            "swagger_settings": orjson.dumps(self.settings, option=orjson.OPT_INDENT_2).decode(),
            "api": api,
            "add_csrf": _csrf_needed(api),
        }
        return render(request, self.template, context)


def _otlp_path(signal: str, request_name: str, response_name: str, rejected: str) -> dict:
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}
    partial = {
        "type": "object",
        "properties": {
            "partialSuccess": {
                "type": "object",
                "properties": {rejected: {"type": "string"}, "errorMessage": {"type": "string"}},
            }
        },
    }
    return {
        "post": {
            "operationId": f"otlp_{signal}",
            "tags": ["otlp"],
            "summary": f"OTLP/HTTP {signal} ingest ({request_name})",
            "description": OTLP_DESCRIPTIONS[signal],
            "security": [{"TokenAuth": []}],
            "requestBody": {
                "required": True,
                "content": {
                    "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
                    "application/json": {"schema": {"type": "object"}},
                },
            },
            "responses": {
                200: {
                    "description": f"{response_name}: empty when everything was accepted, else "
                    f"partialSuccess with {rejected} and errorMessage (one bad item never refuses the batch)",
                    "content": {
                        "application/json": {"schema": partial},
                        "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
                    },
                },
                **{
                    code: {"description": text, "content": error}
                    for code, text in (
                        (400, "Not an export request (not protobuf, not JSON, too deep, bad gzip)"),
                        (401, "Unauthorized"),
                        (403, "The token lacks the write scope"),
                        (405, "Only POST"),
                        (413, "Body too large"),
                        (415, "Neither application/x-protobuf nor application/json"),
                        (429, "Too many requests"),
                        (
                            503,
                            "The span queue had no room in time (WORKBENCH_OTLP_QUEUE): nothing was "
                            "queued; retry after Retry-After seconds, as OTLP exporters do",
                        ),
                    )
                },
            },
        }
    }


OTLP_DESCRIPTIONS = {
    "traces": (
        "Spans of any OpenTelemetry instrumentation (GenAI semantic conventions 1.42 and older names, "
        "OpenInference) become trace events. A span goes to the run it names (span or resource attribute "
        "`workbench.run.id`, a span of its trace naming one, header `X-Workbench-Run`); otherwise its "
        "trace becomes its own run, created on first sight and appended to by later batches. Model calls "
        "are priced on ingest. Content-Encoding gzip is accepted. With the queue (`WORKBENCH_OTLP_QUEUE`, "
        "on in the embedded profile) a 200 means checked and durably queued: a worker process stores the "
        "spans, each queryable within about `WORKBENCH_OTLP_QUEUE_SECONDS` (5 s) of its answer; "
        "without it, stored before the answer."
    ),
    "logs": (
        "GenAI content log events (`gen_ai.user.message`, `gen_ai.choice`, ...) as the contrib "
        "instrumentation emits them: kept until their span arrives at /v1/traces, then joined onto it. "
        "A record whose span was already ingested is refused (counted in partialSuccess); records "
        "without GenAI content are not kept."
    ),
}


class WorkbenchAPI(NinjaAPI):
    """The REST API, plus in its document the ways in ninja does not serve: the OTLP/HTTP endpoints
    (plain Django views at /v1/) and /api/mcp (runs.api.other_doors)."""

    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        schema["paths"]["/v1/traces"] = _otlp_path(
            "traces", "ExportTraceServiceRequest", "ExportTraceServiceResponse", "rejectedSpans"
        )
        schema["paths"]["/v1/logs"] = _otlp_path(
            "logs", "ExportLogsServiceRequest", "ExportLogsServiceResponse", "rejectedLogRecords"
        )
        return with_other_doors(schema)


api = WorkbenchAPI(
    title="Workbench API",
    version="1.0.0",
    description=(
        "Runs, trace events, gates, artifacts and bundles of protocol 1.0.0. Authenticate with "
        "`Authorization: Bearer <token>` (an API token of a workspace) or a session cookie plus CSRF token. "
        'Errors are `{"error": message, "code": CODE}`.'
    ),
    auth=[TokenAuth(), WorkspaceSessionAuth()],
    parser=ProtocolJSONParser(),
    renderer=JSONRenderer(),
    openapi_url="/openapi.json",
    docs_url="/docs",
    docs=ProjectSwagger(),
    urls_namespace="api",
)


def error_response(
    request: HttpRequest, code: str, message: str, status: int | None = None, *, details: dict | None = None
) -> HttpResponse:
    body: dict = {"error": message, "code": code}
    if details:
        body["details"] = details
    return api.create_response(request, body, status=status or errors.status_for(code))


@api.exception_handler(ApiError)
def _api_error(request, exc: ApiError):
    return error_response(request, exc.code, exc.message, exc.status)


@api.exception_handler(ActionError)
def _action_error(request, exc: ActionError):
    message = f"{exc.message} (at {exc.path})" if exc.path else exc.message
    return error_response(request, exc.code, message, details=exc.details)


@api.exception_handler(ProtocolError)
def _protocol_error(request, exc: ProtocolError):
    message = f"{exc.message} (at {exc.path})" if exc.path else exc.message
    return error_response(request, exc.code, message)


@api.exception_handler(RunNotFound)
def _run_not_found(request, exc: RunNotFound):
    return error_response(
        request, ErrorCode.UNKNOWN_RUN, f"no run {exc.args[0]!r}" if exc.args else "no such run"
    )


@api.exception_handler(WebhookNotFound)
def _webhook_not_found(request, exc: WebhookNotFound):
    return error_response(request, "WEBHOOK_NOT_FOUND", "no such webhook", 404)


@api.exception_handler(MonitorNotFound)
def _monitor_not_found(request, exc: MonitorNotFound):
    return error_response(request, "MONITOR_NOT_FOUND", "no such monitor", 404)


@api.exception_handler(Http404)
def _not_found(request, exc):
    return error_response(request, errors.NOT_FOUND, "not found")


@api.exception_handler(AuthenticationError)
def _unauthenticated(request, exc):
    response = error_response(
        request, errors.UNAUTHENTICATED, "authentication required: send Authorization: Bearer <token>", 401
    )
    response["WWW-Authenticate"] = 'Bearer realm="workbench"'
    return response


@api.exception_handler(NotPermitted)
def _forbidden(request, exc: NotPermitted):
    return error_response(request, errors.FORBIDDEN, str(exc), 403)


@api.exception_handler(RateLimited)
def _rate_limited(request, exc: RateLimited):
    response = error_response(request, errors.RATE_LIMITED, str(exc), 429)
    response["Retry-After"] = str(exc.decision.retry_after)
    response["RateLimit-Limit"] = str(exc.decision.limit)
    response["RateLimit-Remaining"] = "0"
    return response


@api.exception_handler(ReplayStored)
def _replay(request, exc: ReplayStored):
    return exc.replay.response()


@api.exception_handler(IdempotencyError)
def _idempotency(request, exc: IdempotencyError):
    return error_response(request, exc.code, str(exc), exc.status)


@api.exception_handler(RequestDataTooBig)
def _too_big(request, exc):
    return too_large_response(request)


@api.exception_handler(BodyIncomplete)
def _incomplete(request, exc: BodyIncomplete):
    return error_response(request, ErrorCode.INVALID_INPUT, str(exc), 400)


def too_large_response(request: HttpRequest) -> HttpResponse:
    limit = request_limit(request)  # the bundle import's own, else the body limit
    return error_response(request, errors.PAYLOAD_TOO_LARGE, f"request body exceeds {limit} bytes", 413)


@api.exception_handler(ValidationError)
def _invalid(request, exc: ValidationError):
    first = exc.errors[0] if exc.errors else {}
    where = ".".join(str(part) for part in first.get("loc", ()) if part not in ("body", "payload"))
    message = first.get("msg", "invalid request")
    if where:
        message = f"{message} (at {where})"
    if len(exc.errors) > 1:
        message += f" and {len(exc.errors) - 1} more problem(s)"
    return error_response(request, ErrorCode.INVALID_INPUT, message, 400)


@api.exception_handler(HttpError)
def _http_error(request, exc: HttpError):
    cause = exc.__cause__
    if isinstance(cause, RequestDataTooBig):
        return too_large_response(request)
    if isinstance(cause, ProtocolError):
        return _protocol_error(request, cause)
    if exc.status_code == 403:
        return error_response(request, errors.FORBIDDEN, exc.message, 403)
    if exc.status_code == 401:
        return _unauthenticated(request, exc)
    code = {404: errors.NOT_FOUND, 405: errors.METHOD_NOT_ALLOWED, 429: errors.RATE_LIMITED}.get(
        exc.status_code, ErrorCode.INVALID_INPUT
    )
    return error_response(request, code, exc.message, exc.status_code)


@api.exception_handler(IntegrityError)
def _integrity(request, exc: IntegrityError):
    logger.warning("write refused by a storage constraint on %s: %s", request.path, exc)
    return error_response(
        request, errors.CONFLICT, "the write conflicts with data already stored for this run", 409
    )


@api.exception_handler(Exception)
def _unexpected(request, exc: Exception):
    logger.error("unhandled API error on %s %s", request.method, request.path, exc_info=exc)
    return error_response(request, errors.INTERNAL_ERROR, "internal error", 500)


@api.get("/health", auth=None, response=HealthOut, tags=["meta"], summary="Liveness check (public)")
def health(request):
    return {"status": "ok", "protocolVersion": PROTOCOL_VERSION}


def _register_routers() -> None:
    api.add_router("/runs", fork_router)  # first: "/runs/{id}:fork" must not reach "/runs/{id}"
    api.add_router("/runs", runstore_router)
    api.add_router("/runs", commands_router)
    api.add_router("/runs", gates_router)
    api.add_router("/runs", bundle_export_router)
    api.add_router("/runs", transcript_router)
    api.add_router("/runs", run_ledger_router)
    api.add_router("/runs", run_budget_router)
    api.add_router("/bundles", bundles_router)
    api.add_router("/cache", cache_router)
    api.add_router("/prices", prices_router)
    api.add_router("/ledger", ledger_router)
    api.add_router("/budgets", budgets_router)
    api.add_router("/webhooks", webhooks_router)
    api.add_router("/gate-policies", gate_policy_router)
    api.add_router("/monitors", monitors_router)
    api.add_router("/slack/apps", slack_router)
    api.add_router("/prompts", prompts_router)
    api.add_router("/prompt-labels", prompt_labels_router)


_register_routers()
