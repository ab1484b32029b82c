"""The OTLP queue's least work before the answer (issue 53): a protobuf body that parses, names
no run and whose spans routing accepts is spooled as it came (runs.actions.otlp_queue.do_queue_body)
and the worker decodes and maps it; any other body takes the full check, each refusal counted in
the answer. The spool write is the same (written, then renamed into ``ready/``), so what a 2xx
promises across a kill -9 is what tests/live/test_otlp_queue_live.py checks."""

from __future__ import annotations

import json

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from runs.actions.otlp_queue import Spool, _read
from runs.models import Run, Workspace
from runs.telemetry import otlp_worker
from tests.telemetry.test_otlp_queue import CHAT, a_trace, body, post, secret, stored

pytestmark = pytest.mark.django_db(transaction=True)

PROTOBUF = "application/x-protobuf"


@pytest.fixture
def spool(tmp_path, settings):
    settings.WORKBENCH_OTLP_QUEUE = True
    settings.WORKBENCH_OTLP_WORKER_INPROCESS = False
    settings.WORKBENCH_OTLP_SPOOL_DIR = tmp_path / "spool"
    settings.WORKBENCH_OTLP_QUEUE_WAIT_SECONDS = 0
    return Spool(tmp_path / "spool")


T0 = 1_767_225_600_000_000_000


def _value(value) -> AnyValue:
    return AnyValue(string_value=value) if isinstance(value, str) else AnyValue(int_value=value)


def pb_body(traces: int = 2, *, attrs: dict | None = None, bad_span_id: bool = False) -> bytes:
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.append(KeyValue(key="service.name", value=_value("raw-app")))
    spans = rs.scope_spans.add().spans
    for t in range(traces):
        for n in range(3):
            span = spans.add()
            span.trace_id = (t + 1).to_bytes(16, "big")
            span.span_id = (t * 100 + n + 1).to_bytes(8, "big")
            if n:
                span.parent_span_id = (t * 100 + 1).to_bytes(8, "big")
            span.name = ("request", "chat gpt-4o-mini", "step")[n]
            span.kind = 1
            span.start_time_unix_nano = T0 + n * 1_000_000
            span.end_time_unix_nano = T0 + n * 1_000_000 + 500_000
            span.status.code = 1
            for key, value in ({**CHAT, **(attrs or {})} if n == 1 else {}).items():
                span.attributes.append(KeyValue(key=key, value=_value(value)))
    if bad_span_id:
        spans[-1].span_id = b"\x00" * 8
    return request.SerializeToString()


def post_pb(client, workspace, data: bytes, **headers):
    return client.post(
        "/v1/traces", data, content_type=PROTOBUF, HTTP_AUTHORIZATION=f"Bearer {secret(workspace)}", **headers
    )


def queued(spool: Spool) -> list:
    return [_read(path) for path in sorted(spool.ready.iterdir())] if spool.ready.exists() else []


def test_a_clean_protobuf_body_is_spooled_as_it_came_and_stored_as_the_full_check_stores_it(
    client, workspace, spool
):
    data = pb_body()
    response = post_pb(client, workspace, data)
    assert response.status_code == 200
    assert ExportTraceServiceResponse.FromString(response.content) == ExportTraceServiceResponse()
    [item] = queued(spool)
    assert item.mapped is None and item.body == data and item.spans == 6  # no per-span work before the answer
    assert otlp_worker.run(spool=spool, once=True) == 1
    # the same spans sent as JSON take the full check (mapped by the receiver): the same events
    other = Workspace.objects.create(slug="json", name="JSON")
    assert post(client, other, body(a_trace(0) + a_trace(1), {"service.name": "raw-app"})).status_code == 200
    assert queued(spool)[0].mapped is not None
    otlp_worker.run(spool=spool, once=True)

    def comparable(events):
        return sorted(
            json.dumps({k: v for k, v in e.items() if k not in ("runId", "seq")}, sort_keys=True)
            for e in events
        )

    assert Run.unscoped.filter(workspace=workspace).count() == 2
    assert comparable(stored(workspace)) == comparable(stored(other))


def test_a_span_routing_refuses_sends_the_body_through_the_full_check(client, workspace, spool):
    response = post_pb(client, workspace, pb_body(bad_span_id=True))
    assert response.status_code == 200
    answer = ExportTraceServiceResponse.FromString(response.content)
    assert answer.partial_success.rejected_spans == 1
    [item] = queued(spool)
    assert item.mapped is not None and item.spans == 5


def test_a_run_named_in_the_body_or_the_header_is_checked_before_the_answer(client, workspace, spool):
    named = post_pb(client, workspace, pb_body(1, attrs={"workbench.run.id": "run_nowhere"}))
    assert ExportTraceServiceResponse.FromString(named.content).partial_success.rejected_spans == 1
    header = post_pb(client, workspace, pb_body(1), HTTP_X_WORKBENCH_RUN="run_nowhere")
    assert ExportTraceServiceResponse.FromString(header.content).partial_success.rejected_spans == 3
    assert [item.spans for item in queued(spool)] == [2]  # the header's spans: none queued


def test_a_body_that_does_not_parse_is_a_400_and_queues_nothing(client, workspace, spool):
    response = post_pb(client, workspace, b"\xff\x00garbage")
    assert response.status_code == 400 and response.json()["code"] == "INVALID_INPUT"
    assert queued(spool) == []
