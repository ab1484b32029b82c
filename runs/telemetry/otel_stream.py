"""Continuous OTLP export: when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, finished runs ship their spans.

How it stays off the write path:

1. ``runs.actions.notify`` calls :meth:`ContinuousExporter.on_change` after a write has committed. It
   only puts ``(workspace id, run id)`` into a bounded queue (``put_nowait``; when the queue is
   full the run is counted as dropped, never waited for). Only runs that have reached a final
   status (completed, failed, cancelled) are queued: the mapping closes still-open spans at the
   last event, so a running run's spans are not final yet.
2. A daemon thread takes run ids off the queue, reads the run's events through the selectors,
   builds the SDK spans with the project's mapping (:func:`runs.telemetry.otel_export.to_readable_spans`,
   deterministic trace and span ids) and hands them to the SDK's ``BatchSpanProcessor``.
3. The ``BatchSpanProcessor`` batches spans of several runs per request and exports them with
   ``OTLPSpanExporter`` (OTLP/HTTP protobuf) in its own thread; its queue is bounded too and
   drops when full. A collector that is down costs that thread its retries, nothing else.

A run that gets more events after it finished (an annotation) is exported again; the span ids
are deterministic, so a backend sees the same spans again rather than new ones.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
from dataclasses import dataclass

from runs.actions.notify import RunChange, register_listener, unregister_listener
from runs.models import Workspace
from runs.protocol.redaction import redacted_view
from runs.providers import egress
from runs.selectors.runs import RunNotFound, get_run, iter_event_bodies

log = logging.getLogger("workbench.otel")

FINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})


@dataclass
class StreamCounters:
    queued: int = 0
    dropped: int = 0  # the run queue was full
    exported_runs: int = 0
    spans: int = 0
    failed_runs: int = 0  # reading or mapping a run failed (logged)


class ContinuousExporter:
    def __init__(
        self,
        *,
        endpoint: str,
        headers: dict[str, str] | None = None,
        timeout: float = 10.0,
        max_runs_queued: int = 1000,
        schedule_delay_millis: float = 2000,
        max_export_batch_size: int = 512,
        service_name: str = "workbench",
        semconv: str = "reference",
        egress_allow: tuple[str, ...] = (),
    ) -> None:
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        # Deferred: otel_export imports the OpenTelemetry SDK, an optional extra.
        from runs.telemetry.otel_export import exporter_for, traces_endpoint

        self.endpoint = traces_endpoint(endpoint)
        self.service_name = service_name
        self.semconv = semconv
        self.counters = StreamCounters()
        self._runs: queue.Queue[tuple[int, str] | None] = queue.Queue(maxsize=max_runs_queued)
        # Through the server's one egress guard (runs.providers.egress): the collector's address
        # is checked at every connection against the operator's allowance.
        self._exporter = exporter_for(
            self.endpoint, headers=headers, timeout=timeout, egress_allow=egress_allow
        )
        self.processor = BatchSpanProcessor(
            self._exporter,
            schedule_delay_millis=schedule_delay_millis,
            max_export_batch_size=max_export_batch_size,
        )
        self._thread = threading.Thread(target=self._work, name="otel-run-export", daemon=True)
        self._thread.start()
        self._closed = False

    # -- after commit (any thread) ----------------------------------------------------------

    def on_change(self, change: RunChange) -> None:
        workspace_id = change.workspace_id  # None: a playground execution, exported by no workspace
        if (
            self._closed
            or change.status not in FINAL_STATUSES
            or change.last_seq == 0
            or workspace_id is None
        ):
            return
        try:
            self._runs.put_nowait((workspace_id, change.run_id))
            self.counters.queued += 1
        except queue.Full:
            self.counters.dropped += 1

    # -- the worker -------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            item = self._runs.get()
            try:
                if item is None:
                    return
                self._export_run(*item)
            except Exception:
                self.counters.failed_runs += 1
                log.exception("OTLP export of run %r failed", item)
            finally:
                self._runs.task_done()

    def _export_run(self, workspace_id: int, run_id: str) -> None:
        from django.db import close_old_connections

        # Deferred: the OpenTelemetry SDK is an optional extra.
        from runs.telemetry.otel_export import to_readable_spans

        close_old_connections()
        try:
            workspace = Workspace.objects.get(pk=workspace_id)
            run = get_run(workspace, run_id)
        except (Workspace.DoesNotExist, RunNotFound):
            return  # deleted in the meantime
        # a run that carries a redaction policy (an imported redacted bundle) leaves redacted by it
        doc, events = redacted_view(run.run_doc, iter_event_bodies(run))
        spans = to_readable_spans(doc, events, service_name=self.service_name, semconv=self.semconv)
        for span in spans:
            self.processor.on_end(span)
        self.counters.exported_runs += 1
        self.counters.spans += len(spans)
        close_old_connections()

    # -- lifetime ---------------------------------------------------------------------------

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every queued run is mapped and its spans are exported (tests, shutdown)."""
        self._runs.join()
        return self.processor.force_flush(int(timeout * 1000))

    def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._runs.put(None)
        self._thread.join(timeout=10)
        self.processor.shutdown()


_active: ContinuousExporter | None = None


def active() -> ContinuousExporter | None:
    return _active


def start_from_settings() -> ContinuousExporter | None:
    """Start the exporter when the operator configured a collector (called from RunsConfig.ready)."""
    global _active
    from django.conf import settings

    endpoint = getattr(settings, "WORKBENCH_OTEL_ENDPOINT", "")
    if not endpoint or _active is not None:
        return _active
    _active = ContinuousExporter(
        endpoint=endpoint,
        service_name=getattr(settings, "WORKBENCH_OTEL_SERVICE_NAME", "workbench"),
        semconv=getattr(settings, "WORKBENCH_OTEL_SEMCONV", "reference"),
        egress_allow=egress.settings_allowance(settings, operator=True),  # the operator's collector
    )
    register_listener(_active.on_change)
    atexit.register(_active.shutdown)
    return _active


def stop() -> None:
    global _active

    if _active is not None:
        unregister_listener(_active.on_change)
        _active.shutdown()
        _active = None
