"""OTLP spans of any GenAI instrumentation -> protocol trace events (pure: no Django): batches,
routing, per-span validation; the per-convention readers of one span are in
:mod:`runs.protocol.otlp_semconv_in` (``span_events``, ``span_role``).

One code path for both conventions an instrumented application emits:

* **OTel GenAI semantic conventions**, current (1.42: ``gen_ai.operation.name``,
  ``gen_ai.provider.name``, ``gen_ai.usage.input_tokens`` / ``output_tokens`` /
  ``cache_read.input_tokens`` / ``reasoning.output_tokens``, ``gen_ai.input.messages`` /
  ``gen_ai.output.messages``, ``execute_tool`` with ``gen_ai.tool.*``) and the older names still
  emitted (``gen_ai.system``, ``gen_ai.usage.prompt_tokens`` / ``completion_tokens``, flattened
  ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*``), with content also taken from span events
  (``gen_ai.system.message``, ``gen_ai.user.message``, ``gen_ai.assistant.message``,
  ``gen_ai.tool.message``, ``gen_ai.choice``, ``gen_ai.content.prompt`` / ``.completion``,
  ``gen_ai.client.inference.operation.details``) or from OTLP log records joined onto their span
  (:func:`join_content_logs`: the contrib ``openai-v2`` instrumentation's way);
* **OpenInference** (``openinference.span.kind`` LLM, EMBEDDING, TOOL, CHAIN, AGENT, RETRIEVER,
  ...): ``llm.model_name``, ``llm.provider`` / ``llm.system``, ``llm.token_count.*`` (with
  ``prompt_details.cache_read`` / ``cache_write`` and ``completion_details.reasoning``),
  flattened ``llm.input_messages.N.message.*`` / ``llm.output_messages.N.message.*``,
  ``input.value`` / ``output.value``, ``tool.name``, ``tool_call.*``.

Messages of every source are normalised to the 1.42 shape ``{role, parts: [{type: text,
content} | {type: tool_call, id, name, arguments} | {type: tool_call_response, id, response}],
finish_reason?}`` (the shape ``runs.protocol.otel_semconv`` writes on export).

What a span becomes (all events of a span share ``correlationId`` ``o:<key>``, ``<key>`` the
trace and span ids in base64url (``span_key``); ids are ``o<key>_<suffix>``, so a retried
export maps to the same ids):

* every span: ``span_started`` (start time; kind, parent, its scalar attributes less the
  message content carried below) and ``span_ended`` (end time, duration, status, error), so
  model and tool calls keep their place in the span tree;
* a model span (GenAI ``chat`` / ``text_completion`` / ``generate_content`` / ``embeddings``,
  a span with ``gen_ai.request.model`` and no other operation, OpenInference ``LLM`` /
  ``EMBEDDING``): a ``model_io`` ``request`` at its start (payload ``inputMessages``,
  ``systemInstructions``) and a ``response`` at its end (usage, duration, payload
  ``outputMessages``, ``finishReasons``, ``cacheCreationInputTokens``); each tool call the
  model asked for in its output becomes a ``tool_call`` (name, args; no result) at the end;
* a tool span (GenAI ``execute_tool``, OpenInference ``TOOL``): a ``tool_call`` with args and
  result at its end.

Token counts follow the protocol: ``inputTokens`` is the whole prompt, ``cachedInputTokens`` a
part of it; ``outputTokens`` includes ``reasoningTokens``; ``totalTokens`` is the span's own
total when it has one, else input + output. Cache-write tokens have no protocol field and go to
``payload.cacheCreationInputTokens``.

Batches: :func:`route_spans` decides each span's run, :func:`map_spans` maps a batch with
per-span validation (a bad span is counted and skipped, never refuses the batch:
:func:`partial_success`), :func:`map_batch` does both with a caller's resolver for traces that
become their own run. :func:`load_otlp_json` refuses JSON bodies nested deeper than
``canonical.MAX_NESTING`` with a coded error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from runs.protocol.canonical import MAX_NESTING, load_json_exact, nesting_depth
from runs.protocol.errors import ErrorCode, ProtocolError
from runs.protocol.otlp_semconv_in import (
    CONTENT_EVENT_NAMES,
    STATUS_ERROR,
    STATUS_OK,
    first_attr,
    span_events,
)
from runs.protocol.validate import validate_event

RUN_ATTRIBUTES = ("workbench.run.id", "lwb.run.id")
SESSION_ATTRIBUTES = ("session.id", "gen_ai.conversation.id")
TOO_DEEP = f"nested deeper than {MAX_NESTING} arrays and objects"

_HEX_DIGITS = "0123456789abcdef"
_NO_RESOURCE: Mapping[str, Any] = {}  # a span without resource attributes (never changed)
_MAX_NS = 253402300799 * 1_000_000_000  # 9999-12-31T23:59:59Z: what an ISO timestamp can hold

# --------------------------------------------------------------------------------------------
# Bounded JSON


def load_otlp_json(body: bytes | str) -> Any:
    """An OTLP/JSON body parsed, refusing what the bundle parser refuses.

    Not JSON: ``INVALID_JSON``. Nested deeper than ``canonical.MAX_NESTING`` (512) arrays and
    objects: ``INVALID_INPUT`` with message :data:`TOO_DEEP` (never a ``RecursionError``); a
    non-finite number or a lone surrogate: ``INVALID_JSON`` (they have no canonical form).
    Cost: one orjson parse plus one orjson write (the depth check is done in C for the usual
    body of at most 254 levels).
    """
    try:
        doc = load_json_exact(body)
    except ProtocolError as exc:
        if TOO_DEEP in exc.message:
            raise ProtocolError(ErrorCode.INVALID_INPUT, f"OTLP JSON body is {TOO_DEEP}") from None
        raise
    check_nesting(doc, "OTLP JSON body")
    return doc


def check_nesting(value: Any, what: str = "value") -> None:
    """Raise ``INVALID_INPUT`` if ``value`` nests deeper than ``MAX_NESTING`` (iterative)."""
    try:
        orjson.dumps(value)
        return  # orjson writes at most 254 levels: anything it writes is shallow enough
    except orjson.JSONEncodeError as exc:
        if "ecursion" not in str(exc):
            return  # not a depth problem (a big int, say): judged elsewhere
    if nesting_depth(value) > MAX_NESTING:
        raise ProtocolError(ErrorCode.INVALID_INPUT, f"{what} is {TOO_DEEP}")


# --------------------------------------------------------------------------------------------
# Content log records (OTLP /v1/logs) joined onto their spans


def content_log_name(record: Mapping[str, Any]) -> str | None:
    """The GenAI event a log record carries (``eventName``, else attribute ``event.name``)."""
    name = record.get("eventName") or (record.get("attributes") or {}).get("event.name")
    return name if name in CONTENT_EVENT_NAMES else None


def join_content_logs(
    spans: Sequence[Mapping[str, Any]], records: Iterable[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], list[Mapping[str, Any]]]:
    """Spans with the GenAI content log records of their (trace id, span id) as span events.

    ``records``: decoded log records ``{traceId, spanId, time (ns), eventName?, attributes,
    body}``. Returns ``(spans, unmatched)``: new span dicts for the spans that got records (the
    others are returned as they are), records appended after the span's own events in
    timestamp order; ``unmatched`` are the content records whose span is not in ``spans``
    (to keep for a later batch). Records that carry no GenAI content are dropped.
    """
    by_span: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for record in records:
        name = content_log_name(record)
        if name is None or not record.get("traceId") or not record.get("spanId"):
            continue
        by_span.setdefault((str(record["traceId"]).lower(), str(record["spanId"]).lower()), []).append(record)
    out: list[dict[str, Any]] = []
    for span in spans:
        found = by_span.pop((span.get("traceId"), span.get("spanId")), None)  # type: ignore[arg-type]
        if not found:
            out.append(span)  # type: ignore[arg-type]
            continue
        found.sort(key=lambda r: r.get("time") or 0)
        joined = [
            {
                "name": content_log_name(r),
                "time": r.get("time") or 0,
                "attributes": r.get("attributes") or {},
                "body": r.get("body"),
            }
            for r in found
        ]
        out.append({**span, "events": [*(span.get("events") or ()), *joined]})
    unmatched = [r for group in by_span.values() for r in group]
    return out, unmatched


# --------------------------------------------------------------------------------------------
# Validation of one decoded span


def span_problem(span: Any) -> str | None:
    """Why a decoded span cannot be mapped (``None`` when it can)."""
    if not isinstance(span, Mapping):
        return "a span must be an object"
    if span.get("decodeProblem"):
        return str(span["decodeProblem"])  # the decoder could not read it (runs.telemetry.otlp_ingest)
    trace_id, span_id = span.get("traceId"), span.get("spanId")
    if (
        type(trace_id) is not str
        or len(trace_id) != 32
        or trace_id.strip(_HEX_DIGITS)
        or not trace_id.strip("0")
    ):
        return "traceId must be 32 lowercase hex digits, not all zero"
    if type(span_id) is not str or len(span_id) != 16 or span_id.strip(_HEX_DIGITS) or not span_id.strip("0"):
        return "spanId must be 16 lowercase hex digits, not all zero"
    parent = span.get("parentSpanId")
    if parent is not None and (type(parent) is not str or parent.strip(_HEX_DIGITS)):
        return "parentSpanId must be hex"
    for key in ("start", "end"):
        value = span.get(key)
        if type(value) is not int or not 0 <= value <= _MAX_NS:
            return f"{key} time must be a Unix time in nanoseconds"
    if not span.get("start") and not span.get("end"):
        return "a span needs a start or an end time"
    if not isinstance(span.get("attributes"), Mapping):
        return "attributes must be an object"
    if type(span.get("name", "")) is not str:
        return "name must be text"
    events = span.get("events")
    if events is not None and not isinstance(events, list | tuple):
        return "events must be a list"
    return None


def _events_problem(events: list[dict[str, Any]], validate: bool) -> str | None:
    try:
        orjson.dumps(events)  # lone surrogates, ints beyond 64 bits, > 254 levels
    except (orjson.JSONEncodeError, TypeError) as exc:
        text = str(exc)
        if "ecursion" in text:
            try:
                check_nesting(events, "span content")
            except ProtocolError as too_deep:
                return too_deep.message
        else:
            return f"span content cannot be stored: {text}"
    if validate:
        for event in events:
            try:
                validate_event(event)
            except ProtocolError as exc:
                return exc.message
    return None


# --------------------------------------------------------------------------------------------
# Routing a batch


class Route(NamedTuple):
    """Where one span goes: an existing run (``run_id``) or its trace's own run (``run_id`` None)."""

    run_id: str | None
    source: str  # "span", "trace" (another span of its trace named the run), "resource", "header", "new"
    trace_id: str


@dataclass
class TraceInfo:
    """What a batch says about one trace (for the run it creates or tags)."""

    trace_id: str
    service_name: str | None = None
    session_id: str | None = None
    root_span_id: str | None = None  # set when the batch holds the trace's root span
    root_name: str | None = None
    root_end: int | None = None  # ns
    root_status: str | None = None  # "ok", "error" or None (unset)
    first_name: str | None = None  # the earliest span's name, when the root is not in the batch
    first_start: int | None = None
    span_count: int = 0
    run_id: str | None = None  # the run a span of this trace named (span attribute), if any

    @property
    def title(self) -> str:
        name = self.root_name or self.first_name or f"trace {self.trace_id[:8]}"
        return f"{name} ({self.service_name})" if self.service_name else name

    @property
    def tags(self) -> list[str]:
        tags = []
        if self.service_name:
            tags.append(f"service:{self.service_name}")
        if self.session_id:
            tags.append(f"session:{self.session_id}")
        return tags

    @property
    def metadata(self) -> dict[str, Any]:
        """For ``run.metadata`` of a run created for this trace."""
        meta: dict[str, Any] = {"otel": {"traceId": self.trace_id}}
        if self.service_name:
            meta["otel"]["serviceName"] = self.service_name
        if self.session_id:
            meta["otel"]["sessionId"] = self.session_id
        return meta


def _named_run(source: Mapping[str, Any] | None) -> str | None:
    if not source:
        return None
    for key in RUN_ATTRIBUTES:
        value = source.get(key)
        if type(value) is str and value:
            return value
    return None


def route_spans(
    spans: Sequence[Mapping[str, Any]], header_run_id: str | None = None
) -> tuple[list[Route | None], dict[str, TraceInfo]]:
    """Each span's run, and what the batch says about each trace.

    Order: the span's own attribute (``workbench.run.id`` / ``lwb.run.id``); else the run a span
    of the same trace names by attribute (its root's when the root names one), so a tagged
    root's untagged instrumentor children follow it; else the resource attribute; else the
    ``X-Workbench-Run`` header; else the trace's own run (``Route(None, "new", trace_id)``: the
    caller finds the run it created for the trace earlier, or creates one from
    :class:`TraceInfo`). A span that :func:`span_problem` refuses gets ``None``.
    """
    traces: dict[str, TraceInfo] = {}
    problems = [span_problem(span) for span in spans]
    # what a resource says (service, session, named run), once per resource object: the spans of
    # one ResourceSpans share theirs
    by_resource: dict[int, _ResourceFacts] = {}
    own_runs: list[str | None] = []  # each span's own named run (attribute), read once
    for span, problem in zip(spans, problems, strict=True):
        if problem is not None:
            own_runs.append(None)
            continue
        info = traces.get(span["traceId"])
        if info is None:
            info = traces[span["traceId"]] = TraceInfo(span["traceId"])
        named = _named_run(span["attributes"])
        own_runs.append(named)
        _note_span(info, span, named, _resource_facts(by_resource, span))
    routes: list[Route | None] = []
    for span, problem, own in zip(spans, problems, own_runs, strict=True):
        if problem is not None:
            routes.append(None)
            continue
        resource_run = by_resource[id(span.get("resource") or _NO_RESOURCE)][2]
        routes.append(
            _route(span["traceId"], own, traces[span["traceId"]].run_id, resource_run, header_run_id)
        )
    return routes, traces


_ResourceFacts = tuple[str | None, Any, str | None]  # service.name, session, named run


def _resource_facts(by_resource: dict[int, _ResourceFacts], span: Mapping[str, Any]) -> _ResourceFacts:
    resource = span.get("resource") or _NO_RESOURCE  # alive as long as its spans: ids unique
    facts = by_resource.get(id(resource))
    if facts is None:
        service = resource.get("service.name")
        facts = by_resource[id(resource)] = (
            service if isinstance(service, str) else None,
            first_attr(resource, SESSION_ATTRIBUTES),
            _named_run(resource),
        )
    return facts


def _note_span(info: TraceInfo, span: Mapping[str, Any], named: str | None, facts: _ResourceFacts) -> None:
    """What one span tells about its trace: service, session, root, first span, named run."""
    info.span_count += 1
    if info.service_name is None and facts[0] is not None:
        info.service_name = facts[0]
    if info.session_id is None:
        session = first_attr(span["attributes"], SESSION_ATTRIBUTES) or facts[1]
        if session is not None:
            info.session_id = str(session)
    start = span["start"] or span["end"]
    if not span.get("parentSpanId"):
        info.root_span_id = span["spanId"]
        info.root_name = span.get("name") or None
        info.root_end = span["end"] or span["start"]
        status = span.get("status")
        info.root_status = "error" if status == STATUS_ERROR else "ok" if status == STATUS_OK else None
        if named:
            info.run_id = named
    elif named and info.run_id is None:
        info.run_id = named
    if info.first_start is None or start < info.first_start:
        info.first_start, info.first_name = start, span.get("name") or None


def _route(
    trace_id: str, own: str | None, inherited: str | None, resource_run: str | None, header_run_id: str | None
) -> Route:
    if own:
        return Route(own, "span", trace_id)
    if inherited:
        return Route(inherited, "trace", trace_id)
    if resource_run:
        return Route(resource_run, "resource", trace_id)
    if header_run_id:
        return Route(header_run_id, "header", trace_id)
    return Route(None, "new", trace_id)


def inherited_runs(routes: Sequence[Route | None]) -> set[str]:
    """The runs spans were routed to only because another span of their trace named them."""
    return {r.run_id for r in routes if r is not None and r.source == "trace" and r.run_id is not None}


def reroute_unknown(routes: Sequence[Route | None], held: set[str]) -> list[Route | None]:
    """``routes`` with each span that inherited an unknown run (``held``: the inherited runs the
    workspace has) sent to its trace's own run instead. Only a span that names an unknown run
    itself (or through its resource or the request's header, which speak for every span they
    cover) is refused: one span naming a run that does not exist no longer takes its trace's
    other spans with it."""
    return [
        Route(None, "new", r.trace_id)
        if r is not None and r.source == "trace" and r.run_id is not None and r.run_id not in held
        else r
        for r in routes
    ]


# --------------------------------------------------------------------------------------------
# Mapping a batch


@dataclass
class MappedBatch:
    """A batch mapped: events per run (time order), and what was refused."""

    events_by_run: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    accepted_spans: int = 0
    rejected_spans: int = 0
    message: str | None = None  # the first refusals, for the OTLP partial_success

    def reject(self, index: int, why: str) -> None:
        self.rejected_spans += 1
        if self.rejected_spans <= 3:
            note = f"span {index}: {why}"
            self.message = note if self.message is None else f"{self.message}; {note}"
        elif self.rejected_spans == 4:
            self.message = f"{self.message}; ..."


def map_spans(
    spans: Sequence[Mapping[str, Any]],
    run_ids: Sequence[str | None],
    *,
    validate: bool = True,
    checked: bool = False,
    mapped: list[list[tuple[int, dict[str, Any]]] | None] | None = None,
) -> MappedBatch:
    """Map a batch: span ``i`` goes to run ``run_ids[i]`` (``None``: refused, counted as such).

    Each span is checked on its own (:func:`span_problem`, then its events: storable JSON and,
    with ``validate``, the protocol's event schema); a span that fails is counted in
    ``rejected_spans`` and the others are kept. Events of each run are in time order (at equal
    times, batch order, then the span's own order).

    ``mapped``, when given, gets each span's ``(time, event)`` pairs (None for a span refused),
    in the batch's order: what :func:`group_mapped` groups again for other run ids.
    """
    batch = MappedBatch()
    grouped: dict[str, list[tuple[int, int, int, dict[str, Any]]]] = {}
    keep = mapped.append if mapped is not None else None
    for index, (span, run_id) in enumerate(zip(spans, run_ids, strict=True)):
        if keep is not None:
            keep(None)  # replaced below once the span maps
        if run_id is None:
            batch.reject(index, span_problem(span) or "the span names no run")
            continue
        problem = None if checked else span_problem(span)
        if problem is not None:
            batch.reject(index, problem)
            continue
        try:
            pairs = span_events(span, run_id)
        except (ValueError, TypeError, OverflowError, KeyError, AttributeError) as exc:
            batch.reject(index, f"cannot map the span: {exc}")
            continue
        events = [event for _when, event in pairs]
        problem = _events_problem(events, validate)
        if problem is not None:
            batch.reject(index, problem)
            continue
        batch.accepted_spans += 1
        if mapped is not None:
            mapped[-1] = pairs
        bucket = grouped.setdefault(run_id, [])
        for order, (when, event) in enumerate(pairs):
            bucket.append((when, index, order, event))
    _group(batch, grouped)
    return batch


def _group(batch: MappedBatch, grouped: dict[str, list[tuple[int, int, int, dict[str, Any]]]]) -> None:
    for run_id, items in grouped.items():
        # (time, span index, order) is unique per entry: the tuples sort without a key function
        # and never compare their events
        items.sort()
        batch.events_by_run[run_id] = [t[3] for t in items]


def group_mapped(
    mapped: Sequence[Sequence[Sequence[Any]] | None], run_ids: Sequence[str | None]
) -> MappedBatch:
    """:func:`map_spans` for spans mapped earlier (``mapped``: each span's ``(time, event)`` pairs,
    None for a span refused then, which is skipped and not counted again): each event gets the
    run id of its span (``event["runId"]`` set in place) and each run's events are ordered as
    :func:`map_spans` orders them. A span whose run id is None is skipped."""
    batch = MappedBatch()
    grouped: dict[str, list[tuple[int, int, int, dict[str, Any]]]] = {}
    for index, (pairs, run_id) in enumerate(zip(mapped, run_ids, strict=True)):
        if pairs is None or run_id is None:
            continue
        batch.accepted_spans += 1
        bucket = grouped.get(run_id)
        if bucket is None:
            bucket = grouped[run_id] = []
        for order, (when, event) in enumerate(pairs):
            event["runId"] = run_id
            bucket.append((when, index, order, event))
    _group(batch, grouped)
    return batch


_ROUTE_FIELDS = ("traceId", "spanId", "parentSpanId", "name", "start", "end", "status")


def routing_facts(spans: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What :func:`route_spans` reads of each span, as JSON values: ``(spans, resources)``, each
    span a small dict (ids, parent, name, times, status, its run and session attributes) whose
    ``"resource"`` is the index of its resource's facts in ``resources`` (service, session and
    run attributes; one entry per resource object). :func:`with_resources` makes them spans
    that :func:`route_spans` routes as it routes the originals. ``spans`` must have passed
    :func:`span_problem`."""
    resources: list[dict[str, Any]] = []
    index_of: dict[int, int] = {}
    out: list[dict[str, Any]] = []
    for span in spans:
        resource = span.get("resource") or _NO_RESOURCE
        at = index_of.get(id(resource))  # alive as long as its spans: ids unique
        if at is None:
            at = index_of[id(resource)] = len(resources)
            resources.append(_route_attributes(resource, with_service=True))
        facts = {k: span[k] for k in _ROUTE_FIELDS if k in span}
        status = span.get("status")
        facts["status"] = status if status == STATUS_ERROR or status == STATUS_OK else None
        facts["attributes"] = _route_attributes(span["attributes"])
        facts["resource"] = at
        out.append(facts)
    return out, resources


def _route_attributes(attrs: Mapping[str, Any], with_service: bool = False) -> dict[str, Any]:
    """The run and session attributes of ``attrs`` (and ``service.name``) as routing reads them,
    as JSON text: a run id or a service name is read only when it is text (others are left
    out), a session as ``str`` of the first one set."""
    out: dict[str, Any] = {}
    for key in (*RUN_ATTRIBUTES, "service.name") if with_service else RUN_ATTRIBUTES:
        if type(attrs.get(key)) is str:
            out[key] = attrs[key]
    session = first_attr(attrs, SESSION_ATTRIBUTES)
    if session is not None:
        out[SESSION_ATTRIBUTES[0]] = str(session)
    return out


def with_resources(spans: list[dict[str, Any]], resources: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The spans of :func:`routing_facts` with each ``"resource"`` index replaced, in place, by
    its resource's facts (one dict per resource, shared by its spans, as decoded spans share
    theirs)."""
    for span in spans:
        span["resource"] = resources[span["resource"]]
    return spans


def map_batch(
    spans: Sequence[Mapping[str, Any]],
    header_run_id: str | None,
    resolve: Callable[[TraceInfo], str | None],
    *,
    validate: bool = True,
) -> tuple[MappedBatch, list[Route | None], dict[str, TraceInfo]]:
    """Route and map a batch in one call.

    ``resolve(trace_info)`` is called once per trace that has spans routed ``new``: it returns
    the run id for the trace (the run created for it by an earlier batch, or a new one), or
    ``None`` to refuse those spans. Returns the mapped batch, the routes and the trace facts.
    """
    routes, traces = route_spans(spans, header_run_id)
    resolved: dict[str, str | None] = {}
    run_ids: list[str | None] = []
    for route in routes:
        if route is None:
            run_ids.append(None)
        elif route.run_id is not None:
            run_ids.append(route.run_id)
        else:
            if route.trace_id not in resolved:
                resolved[route.trace_id] = resolve(traces[route.trace_id])
            run_ids.append(resolved[route.trace_id])
    return map_spans(spans, run_ids, validate=validate, checked=True), routes, traces


def partial_success(batch: MappedBatch) -> dict[str, Any]:
    """The OTLP/JSON ``ExportTraceServiceResponse`` for a batch (``{}`` when all were accepted)."""
    if not batch.rejected_spans:
        return {}
    return {
        "partialSuccess": {
            "rejectedSpans": str(batch.rejected_spans),  # int64 is a string in OTLP/JSON
            "errorMessage": batch.message or "",
        }
    }
