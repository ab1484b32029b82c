"""``POST /v1/traces`` and ``POST /v1/logs``: OTLP/HTTP ingest (protobuf or JSON) into runs.

Authenticated like the REST API (a workspace token with the write scope; rate limits apply).
Decoding: runs/telemetry/otlp_ingest.py; the writes: runs/actions/otlp.py. The answer is the
OTLP export response in the request's encoding, with ``partial_success`` (rejected count and a
message) when some spans or records were refused: one bad span never refuses the batch. Spans are
stored before the answer, or queued: the file spool (``WORKBENCH_OTLP_QUEUE``, the embedded
profile) or a Redis Stream (``WORKBENCH_OTLP_BUFFER=redis``, the scaled profile). Only a
request that is no export request at all (or unauthenticated, forbidden, rate limited) answers
``{"error", "code"}`` JSON with a 4xx, and then nothing is written.
"""

from __future__ import annotations

import gzip
import zlib

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from accounts.principals import principal_for_token
from accounts.ratelimit import RateLimited, check_request
from accounts.tokens import authenticate_token
from runs.actions.otlp import do_ingest_logs, do_ingest_spans
from runs.actions.otlp_queue import QueueFull, do_queue_body, do_queue_spans
from runs.actions.otlp_streams import do_stream_body, do_stream_spans
from runs.actions.permissions import Action
from runs.protocol.errors import ErrorCode, ProtocolError
from runs.telemetry import otlp_worker
from runs.telemetry.otlp_ingest import (
    logs_from_json,
    logs_from_protobuf,
    logs_response,
    spans_from_json,
    spans_from_protobuf,
    spoolable_protobuf_spans,
    trace_response,
)
from runs.web.wire import WireJsonResponse

PROTOBUF = "application/x-protobuf"


def _error(code: str, message: str, status: int) -> WireJsonResponse:
    return WireJsonResponse({"error": message, "code": code}, status=status)


def _body(request: HttpRequest) -> bytes:
    data = request.body
    encoding = (request.headers.get("Content-Encoding") or "").lower()
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if encoding == "gzip":
        decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            data = decompressor.decompress(data, limit + 1)
        except (zlib.error, gzip.BadGzipFile) as exc:
            raise ProtocolError(ErrorCode.INVALID_INPUT, f"bad gzip body: {exc}") from None
        if len(data) > limit:
            raise ProtocolError(ErrorCode.INVALID_INPUT, f"decompressed body exceeds {limit} bytes")
    elif encoding not in ("", "identity"):
        raise ProtocolError(ErrorCode.INVALID_INPUT, f"unsupported Content-Encoding {encoding!r}")
    return data


def _caller(request: HttpRequest, what: str):
    """The authenticated caller, or the refusal to answer."""
    if request.method != "POST":
        response = _error("METHOD_NOT_ALLOWED", f"{request.method} is not allowed here", 405)
        response["Allow"] = "POST"
        return None, response
    raw = (request.headers.get("Authorization") or "").partition(" ")
    token = authenticate_token(raw[2].strip()) if raw[0].lower() == "bearer" else None
    if token is None:
        response = _error("UNAUTHENTICATED", "send Authorization: Bearer <workspace token>", 401)
        response["WWW-Authenticate"] = 'Bearer realm="workbench"'
        return None, response
    caller = principal_for_token(token)
    try:
        check_request(
            workspace_id=caller.workspace.pk, credential=caller.credential, credential_limit=caller.rate_limit
        )
    except RateLimited as exc:
        response = _error("RATE_LIMITED", str(exc), 429)
        response["Retry-After"] = str(exc.decision.retry_after)
        return None, response
    if not caller.may(Action.APPEND_EVENTS):
        return None, _error("FORBIDDEN", f"ingesting {what} needs the write scope", 403)
    return caller, None


def _answer(payload: bytes | dict, content_type: str) -> HttpResponse:
    if isinstance(payload, bytes):
        return HttpResponse(payload, content_type=content_type)
    return WireJsonResponse(payload)


def _queue_full(exc: QueueFull) -> HttpResponse:
    response = _error(ErrorCode.STORAGE_UNAVAILABLE, f"the span queue is full ({exc}); retry", 503)
    response["Retry-After"] = "1"
    return response


def _queue_as_it_came(caller, body: bytes, content_type: str, count: int, *, streamed: bool) -> HttpResponse:
    if not streamed:
        otlp_worker.ensure_worker()
    try:
        report = (do_stream_body if streamed else do_queue_body)(
            workspace=caller.workspace, body=body, content_type=content_type, spans=count, actor=caller.actor
        )
    except QueueFull as exc:
        return _queue_full(exc)
    return _answer(*trace_response(content_type == PROTOBUF, report.rejected, report.message))


@csrf_exempt
def traces(request: HttpRequest) -> HttpResponse:
    caller, refusal = _caller(request, "traces")
    if refusal is not None:
        return refusal
    content_type = (request.content_type or "").lower()
    if content_type not in (PROTOBUF, "application/json"):
        return _error("UNSUPPORTED_MEDIA_TYPE", "send application/x-protobuf or application/json", 415)
    header_run_id = request.headers.get("X-Workbench-Run") or None
    streamed = settings.WORKBENCH_OTLP_BUFFER == "redis"  # the scaled profile: a Redis Stream
    spooled = settings.WORKBENCH_OTLP_QUEUE and not streamed  # the embedded profile: the file spool
    try:
        body = _body(request)
        if (spooled or streamed) and content_type == PROTOBUF and header_run_id is None:
            # The least work before the answer: a body that parses, names no run and has no span
            # routing would refuse is queued as it came (the spool's file or the stream's entry);
            # the worker or a storer decodes and maps it.
            count = spoolable_protobuf_spans(body)
            if count is not None:
                return _queue_as_it_came(caller, body, content_type, count, streamed=streamed)
        spans = spans_from_protobuf(body) if content_type == PROTOBUF else spans_from_json(body)
    except ProtocolError as exc:
        return _error(exc.code, exc.message, 400)
    if streamed or spooled:
        if spooled:
            otlp_worker.ensure_worker()
        try:
            report = (do_stream_spans if streamed else do_queue_spans)(
                workspace=caller.workspace,
                spans=spans,
                body=body,
                content_type=content_type,
                header_run_id=header_run_id,
                actor=caller.actor,
            )
        except QueueFull as exc:
            return _queue_full(exc)
    else:
        report = do_ingest_spans(
            workspace=caller.workspace, spans=spans, header_run_id=header_run_id, actor=caller.actor
        )
    return _answer(*trace_response(content_type == PROTOBUF, report.rejected, report.message))


@csrf_exempt
def logs(request: HttpRequest) -> HttpResponse:
    caller, refusal = _caller(request, "logs")
    if refusal is not None:
        return refusal
    content_type = (request.content_type or "").lower()
    if content_type not in (PROTOBUF, "application/json"):
        return _error("UNSUPPORTED_MEDIA_TYPE", "send application/x-protobuf or application/json", 415)
    try:
        body = _body(request)
        records = logs_from_protobuf(body) if content_type == PROTOBUF else logs_from_json(body)
    except ProtocolError as exc:
        return _error(exc.code, exc.message, 400)
    report = do_ingest_logs(workspace=caller.workspace, records=records)
    return _answer(*logs_response(content_type == PROTOBUF, report.rejected, report.message))
