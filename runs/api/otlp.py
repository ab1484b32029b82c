"""``POST /v1/traces``: OTLP/HTTP trace ingest (protobuf or JSON) into runs (see runs/telemetry/otlp_ingest.py).

Authenticated like the REST API (a workspace token with the write scope; rate limits apply);
answers in the request's encoding (an empty ``ExportTraceServiceResponse``) or, on refusal, with
``{"error", "code"}`` JSON and nothing written.
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
from runs import actions
from runs.actions.permissions import Action
from runs.models import held_event_ids
from runs.protocol.errors import ErrorCode, ProtocolError
from runs.selectors.runs import RunNotFound, get_run
from runs.telemetry.otlp_ingest import events_by_run, spans_from_json, spans_from_protobuf
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


@csrf_exempt
def traces(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        response = _error("METHOD_NOT_ALLOWED", f"{request.method} is not allowed here", 405)
        response["Allow"] = "POST"
        return response
    raw = (request.headers.get("Authorization") or "").partition(" ")
    token = authenticate_token(raw[2].strip()) if raw[0].lower() == "bearer" else None
    if token is None:
        response = _error("UNAUTHENTICATED", "send Authorization: Bearer <workspace token>", 401)
        response["WWW-Authenticate"] = 'Bearer realm="workbench"'
        return response
    caller = principal_for_token(token)
    try:
        check_request(
            workspace_id=caller.workspace.pk, credential=caller.credential, credential_limit=caller.rate_limit
        )
    except RateLimited as exc:
        response = _error("RATE_LIMITED", str(exc), 429)
        response["Retry-After"] = str(exc.decision.retry_after)
        return response
    if not caller.may(Action.APPEND_EVENTS):
        return _error("FORBIDDEN", "ingesting traces needs the write scope", 403)
    content_type = (request.content_type or "").lower()
    try:
        body = _body(request)
        if content_type == PROTOBUF:
            spans = spans_from_protobuf(body)
        elif content_type == "application/json":
            spans = spans_from_json(body)
        else:
            return _error("UNSUPPORTED_MEDIA_TYPE", "send application/x-protobuf or application/json", 415)
        groups = events_by_run(spans, request.headers.get("X-Workbench-Run"))
        runs = {run_id: get_run(caller.workspace, run_id) for run_id in groups}
        for run_id, events in groups.items():
            ids = [e["id"] for e in events]
            seen = set(held_event_ids(runs[run_id], ids, limit=len(ids)))
            fresh = [e for e in events if e["id"] not in seen]
            if fresh:
                actions.do_append_events(
                    workspace=caller.workspace, run_id=run_id, events=fresh, actor=caller.actor
                )
    except RunNotFound as exc:
        return _error(ErrorCode.UNKNOWN_RUN, f"no run {exc.args[0]!r}", 404)
    except (ProtocolError, actions.ActionError) as exc:
        return _error(exc.code, exc.message, 400)
    if content_type == PROTOBUF:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

        return HttpResponse(ExportTraceServiceResponse().SerializeToString(), content_type=PROTOBUF)
    return WireJsonResponse({})
