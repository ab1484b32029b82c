"""What every write shares: the refusal type, the engine context, the row lock, the appender
(consecutive seqs, batched inserts, derived versions) and the projection kept beside the events.

Only modules of ``runs.actions`` import this one: adapters call the ``do_*`` functions.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, models, router, transaction
from django.db.models import signals
from django.db.models.base import ModelState
from django.utils import timezone

from runs.actions import responsecache, rollup_metrics, rollups
from runs.actions.workspaces import READ_ONLY, is_read_only
from runs.engine.commands import Context
from runs.engine.errors import EngineError
from runs.engine.fold import apply_event
from runs.engine.lifecycle import run_title
from runs.engine.state import RunState
from runs.fields import ProtocolCharField, column_value, fit, to_column
from runs.ids import INVALID_RUN_ID, run_id_problem
from runs.models import (
    ArtifactVersion,
    Event,
    RuleSetVersion,
    Run,
    RunParent,
    RunSnapshot,
    Workspace,
    span_ref_of,
)
from runs.protocol.errors import ErrorCode, ProtocolError
from runs.protocol.redaction import policy_of
from runs.protocol.schemas import default_registry
from runs.protocol.timestamps import to_datetime
from runs.protocol.values import dumps, loads, new_id, now_iso


class ActionError(Exception):
    """A refused write: nothing was changed. `code` is a protocol error code."""

    def __init__(self, code: str, message: str, path: str = "", *, details: dict | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.path = path
        self.details = details  # machine-readable particulars (the API answers them as `details`)

    def __str__(self) -> str:
        where = f" at {self.path}" if self.path else ""
        return f"{self.code}{where}: {self.message}"

    @classmethod
    def wrap(cls, exc: EngineError | ProtocolError) -> ActionError:
        return cls(exc.code, exc.message, getattr(exc, "path", "") or "")


@dataclass
class AppendResult:
    run: Run
    state: RunState
    events: list[dict] = field(default_factory=list)
    first_seq: int = 0
    last_seq: int = 0

    @property
    def seqs(self) -> list[int]:
        return list(range(self.first_seq, self.last_seq + 1)) if self.events else []


@functools.cache
def _schemas():
    return default_registry()  # compiling the validators is costly: once per process


def engine_context() -> Context:
    return Context(now=now_iso, new_id=new_id, schemas=_schemas())


def parse_ts(value: str | None) -> datetime | None:
    """A protocol timestamp as an aware datetime for a column (year 0000 and other instants
    Python cannot hold are clamped; the protocol text in the document stays authoritative)."""
    return to_datetime(value)


def projection_fields(state: RunState) -> dict[str, Any]:
    run = state.run
    return {
        "status": run["status"],
        "title": run_title(run),
        "ended_at": parse_ts(run.get("endedAt")),
        "tags": list(run.get("tags") or []),
        "subject": run.get("subject"),
        "doc": dumps(run),
        "state": dumps(state.to_json()),
        "revision": state.revision,
        "pending_gates": len(state.pending_gates()),
        "rejected_gates": sum(len(slots) for slots in state.rejections.values()),
        "event_count": state.revision,
        "model_calls": state.model_calls,
        "total_tokens": state.tokens.get("totalTokens", 0),
        "cost_totals": dict(state.cost),
        "duration_ms": _duration_ms(run),
        "cost_amount": max((float(Decimal(v)) for v in state.cost.values()), default=0.0),
    }


def _duration_ms(run: dict[str, Any]) -> int:
    """A run document's duration in whole ms, -1 without an end (the runs list's sort key)."""
    start, end = parse_ts(run.get("startedAt")), parse_ts(run.get("endedAt"))
    if start is None or end is None or run.get("status") == "running":
        return -1
    return max(0, round((end - start).total_seconds() * 1000))


def new_instance(model: type[models.Model], /, **values: Any) -> Any:
    """``model(**values)`` for a new row, without ``Model.__init__``'s walk over every field
    (about 5% of OTLP ingest's time on small traces, a run and a trace row per trace):
    each column's default (a callable one called), then ``values`` by attribute name or, for a
    foreign key, by the field's name with the related object (its pk set, the object cached as
    ``Model.__init__`` caches it, and the row's database chosen as its descriptor chooses it).
    Models with ``pre_init`` / ``post_init`` receivers, and names
    it does not know, take ``model(**values)`` itself (tests/storage/test_actions.py compares
    the two)."""
    plain, factories, relations = _instance_defaults(model)
    if (
        signals.pre_init.has_listeners(model)
        or signals.post_init.has_listeners(model)
        or not values.keys() <= plain.keys() | relations.keys()
    ):
        return model(**values)
    obj = model.__new__(model)
    state = obj._state = ModelState()
    data = obj.__dict__
    data.update(plain)
    for attname, factory in factories:
        data[attname] = factory()
    for name, value in values.items():
        attname = relations.get(name)
        if attname is None:
            data[name] = value
        else:
            data[attname] = value.pk if value is not None else None
            state.fields_cache[name] = value
            if value is not None and state.db is None:  # as the relation's descriptor does
                state.db = router.db_for_write(model, instance=value)
    return obj


@functools.cache
def _instance_defaults(model: type[models.Model]) -> tuple[dict[str, Any], tuple, dict[str, str]]:
    """Per concrete field of ``model``: its default by attribute name (a callable default in
    ``factories``), and each foreign key's name -> attribute name."""
    plain: dict[str, Any] = {}
    factories = []
    relations: dict[str, str] = {}
    for fld in model._meta.concrete_fields:
        if fld.has_default() and callable(fld.default):
            factories.append((fld.attname, fld.default))
        else:
            plain[fld.attname] = fld.get_default()
        if fld.many_to_one:  # a one-to-one field's name is not known here: model(**values) takes it
            relations[fld.name] = fld.attname
    return plain, tuple(factories), relations


def new_run_row(
    *, workspace: Workspace, state: RunState, actor: str, has_engine: bool = True, projection: bool = True
) -> Run:
    """A new run row for ``state`` (not saved). ``projection=False`` leaves the projection out
    for a caller that sets it once its events are applied (:func:`save_new_runs` does): the
    initial one would be written into the row and then replaced before any save."""
    run_doc = state.run
    run = new_instance(
        Run,
        run_id=run_doc["id"],
        workspace=workspace,
        workflow_id=run_doc["workflowId"],
        workflow_version=run_doc["workflowVersion"],
        started_at=parse_ts(run_doc["startedAt"]),
        has_engine=has_engine,
        created_by=actor,
        **(projection_fields(state) if projection else {}),
    )
    run.last_seq = 0
    return run


def _parents_of(run_doc: dict) -> list[str]:
    context = run_doc.get("context") or {}
    if context.get("parentRunIds"):
        return list(context["parentRunIds"])
    if context.get("parentRunId"):
        return [context["parentRunId"]]
    return []


def save_new_run(run: Run) -> None:
    """Insert a new run row; an id already taken *in the same workspace* is RUN_ID_COLLISION
    (other workspaces' ids are invisible here and never collide)."""
    problem = run_id_problem(run.run_id)
    if problem:
        raise ActionError(INVALID_RUN_ID, problem, "run.id")
    collision = ActionError(
        ErrorCode.RUN_ID_COLLISION, f"a run with id {run.run_id!r} already exists in this workspace"
    )
    if Run.objects.by_run_id(run.workspace, run.run_id).exists():
        raise collision
    try:
        with transaction.atomic():
            run.save(force_insert=True)
    except IntegrityError:
        raise collision from None
    RunParent.objects.bulk_create(
        RunParent(child=run, parent_run_id=parent, position=i)
        for i, parent in enumerate(_parents_of(run.run_doc))
    )
    if connection.vendor == "postgresql" and to_column(run.workflow_id) != fit(
        to_column(run.workflow_id), _WORKFLOW_ID_WIDTH
    ):
        # a workflow id longer than its column: hold it as a run read back holds it (the rollups
        # file this run's calls under the same label whichever way the run was loaded)
        run.refresh_from_db(fields=["workflow_id"])
    rollups.count_new_run(run)


def _char_width(model: type[models.Model], name: str) -> int:
    """The ``max_length`` of a character column of ``model``."""
    field = model._meta.get_field(name)
    if not isinstance(field, models.Field) or field.max_length is None:
        raise TypeError(f"{model.__name__}.{name} has no max_length")
    return field.max_length


_WORKFLOW_ID_WIDTH = _char_width(Run, "workflow_id")


def _column_of(field: models.Field) -> str:
    """A concrete field's column (Django types it optional: a field without one has no column)."""
    if field.column is None:
        raise TypeError(f"{field} has no column")
    return field.column


_EVENT_COLUMNS = (
    "run_id",
    "seq",
    "event_id",
    "type",
    "ts",
    "step_id",
    "correlation_id",
    "body",
    "actor",
    "recorded_at",
    "span_ref",
)


def _event_row(run_pk: int, seq: int, event: dict, actor: str, recorded_at: object, postgres: bool) -> tuple:
    # filter columns cut to their width and spelt as runs.fields stores them (NUL on PostgreSQL,
    # where `actor` arrives already spelt); the body keeps the full protocol text
    if postgres:  # column_value(x, connection, width) without a connection lookup per column
        return (
            run_pk,
            seq,
            fit(to_column(event["id"]), 200),
            event["type"],
            event["ts"][:40],
            fit(to_column(event.get("stepId") or ""), 200),
            fit(to_column(event.get("correlationId") or ""), 200),
            dumps(event),
            actor,
            recorded_at,
            fit(to_column(span_ref_of(event)), 220),  # the trace view's index key
        )
    return (
        run_pk,
        seq,
        event["id"][:200],
        event["type"],
        event["ts"][:40],
        (event.get("stepId") or "")[:200],
        (event.get("correlationId") or "")[:200],
        dumps(event),
        actor,
        recorded_at,
        span_ref_of(event)[:220],
    )


# Up to this many rows go in one multi-row INSERT (one round trip); larger batches use COPY.
_INSERT_VALUES_MAX_ROWS = 500


def _event_table_sql() -> tuple[str, str]:
    table = connection.ops.quote_name(Event._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(c) for c in _EVENT_COLUMNS)
    return table, columns


def _values_insert_sql(rows: list[tuple]) -> tuple[str, list]:
    table, columns = _event_table_sql()
    row = "(" + ", ".join(["%s"] * len(_EVENT_COLUMNS)) + ")"
    params = [value for r in rows for value in r]
    return f"INSERT INTO {table} ({columns}) VALUES " + ", ".join([row] * len(rows)), params


def uses_copy(rows: list[tuple]) -> bool:
    """Whether :func:`insert_events` writes ``rows`` by COPY (PostgreSQL, a large batch)."""
    return connection.vendor == "postgresql" and len(rows) > _INSERT_VALUES_MAX_ROWS


def event_copy_sql() -> str:
    """The COPY statement of the event table's rows (read in the thread that owns the connection)."""
    table, columns = _event_table_sql()
    return f"COPY {table} ({columns}) FROM STDIN"


def copy_event_rows(cursor: Any, sql: str, rows: list[tuple]) -> None:
    """COPY ``rows`` on a psycopg ``cursor`` with the statement of :func:`event_copy_sql`. Touches
    no Django connection: an import runs it in a thread of its own (runs.actions.bigimport)."""
    with cursor.copy(sql) as copy:
        for row in rows:
            copy.write_row(row)


def insert_events(rows: list[tuple]) -> None:
    """The append-only event table's fast path: on PostgreSQL one multi-row INSERT for a small
    batch (one round trip) or COPY for a large one; executemany on SQLite.

    Events are never updated, so the ORM's per-instance bookkeeping buys nothing here; the rows
    are the same columns the Event model declares (checked by tests/storage/test_actions.py).
    """
    if not rows:
        return
    with connection.cursor() as cursor:
        if uses_copy(rows):
            copy_event_rows(cursor.cursor, event_copy_sql(), rows)
        elif connection.vendor == "postgresql":
            cursor.execute(*_values_insert_sql(rows))
        else:
            table, columns = _event_table_sql()
            placeholders = ", ".join(["%s"] * len(_EVENT_COLUMNS))
            cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({placeholders})", rows)


def _save_run_with_events(run: Run, rows: list[tuple]) -> None:
    """`run.save()` and the INSERT of `rows` in ONE statement on PostgreSQL (the INSERT rides in a
    data-modifying WITH clause of the UPDATE): a host appending one event per commit pays four
    round trips (BEGIN, lock, this, COMMIT) instead of six or seven. Same columns and conversions
    as `run.save()` (auto_now included); elsewhere, or for large batches, two statements."""
    if connection.vendor != "postgresql" or not rows or len(rows) > _INSERT_VALUES_MAX_ROWS:
        insert_events(rows)
        run.save()
        return
    from django.db.models.sql import UpdateQuery

    fields = [f for f in Run._meta.local_concrete_fields if not f.primary_key]
    query = UpdateQuery(Run)
    query.add_update_fields([(f, None, f.pre_save(run, False)) for f in fields])
    query.add_q(models.Q(pk=run.pk))
    update_sql, update_params = query.get_compiler(connection.alias).as_sql()
    insert_sql, insert_params = _values_insert_sql(rows)
    with connection.cursor() as cursor:
        cursor.execute(f"WITH appended AS ({insert_sql}) {update_sql}", [*insert_params, *update_params])
        if cursor.rowcount != 1:
            raise ActionError(ErrorCode.UNKNOWN_RUN, f"no run {run.run_id!r}")


def is_error_event(event: dict) -> bool:
    """Whether an event is one of the errors the runs list counts: an ``error`` event, a failed
    span's end, a failed step's completion."""
    kind = event["type"]
    if kind == "error":
        return True
    if kind == "span_ended":
        return event.get("status") == "error" or bool(event.get("error"))
    return kind == "step_completed" and event.get("ok") is False


class Appender:
    """Applies events to a run's state one by one and collects the rows they produce.

    O(len(events)): nothing here reads or rewrites the earlier trace. Artifact versions and
    snapshots are taken right after the event that produced them.
    """

    # Event rows are written once this many are waiting (a run's row id known).
    flush_rows = 5000

    def __init__(
        self,
        run: Run,
        state: RunState,
        actor: str,
        *,
        derive_versions: bool = True,
        fill_cache: bool = True,
    ) -> None:
        self.run = run
        self.run_pk = run.pk  # None for a run not inserted yet (save_new_runs fills it in)
        self.state = state
        self.actor = actor
        self.derive_versions = derive_versions
        # Whether recorded model calls fill the response cache (replays answer from it). Calls
        # ingested from OTLP do not: their requests are what an instrumentation chose to capture
        # (often no messages at all), never a request a replay of ours would send.
        self.fill_cache = fill_cache
        self.interval = settings.WORKBENCH_SNAPSHOT_INTERVAL
        self.first_seq = run.last_seq + 1
        self.seq = run.last_seq
        self.events: list[dict] = []
        self.event_rows: list[tuple] = []
        self.recorded_at = connection.ops.adapt_datetimefield_value(timezone.now())
        # the connection's vendor read once (each read goes through the thread-local proxy)
        self.postgres = connection.vendor == "postgresql"
        self.actor_column = column_value(actor, connection)
        self.artifact_rows: list[ArtifactVersion] = []
        self.ruleset_rows: list[RuleSetVersion] = []
        self.snapshot_rows: list[RunSnapshot] = []
        self.model_responses: list[tuple[int, dict]] = []  # (seq, model_io response) for the cache
        self.gate_events: list[tuple[dict, str]] = []  # (gate request or decision, actor): the dashboard

    def append(self, event: dict) -> None:
        apply_event(self.state, event)
        self.record(event)

    def record(self, event: dict) -> None:
        """Store an event that has already been applied to `self.state`."""
        self.seq += 1
        seq = self.seq
        self.events.append(event)
        self.event_rows.append(
            _event_row(self.run_pk, seq, event, self.actor_column, self.recorded_at, self.postgres)
        )
        if is_error_event(event):
            self.run.error_count += 1
        if event["type"] == "model_io" and event.get("direction") == "response":
            self.model_responses.append((seq, event))
        elif event["type"] in rollup_metrics.GATE_EVENTS:
            self.gate_events.append((event, self.actor))
        if self.derive_versions:
            kind = event["type"]
            if kind == "artifact_written":
                self.artifact_rows.append(artifact_row(self.run, event["artifact"], seq))
            elif kind == "artifact_patch":
                self.artifact_rows.append(
                    artifact_row(self.run, self.state.artifacts[event["artifactKey"]], seq)
                )
            elif kind == "rule_changed":
                snapshot = event["snapshot"]
                self.ruleset_rows.append(
                    RuleSetVersion(
                        run=self.run, rule_set_id=snapshot["id"], version=seq, seq=seq, body=dumps(snapshot)
                    )
                )
        if seq % self.interval == 0:
            self.snapshot_rows.append(RunSnapshot(run=self.run, seq=seq, state=dumps(self.state.to_json())))
        if len(self.event_rows) >= self.flush_rows and self.run_pk is not None:
            self._flush_events()

    def _flush_events(self) -> None:
        insert_events(self.event_rows)
        self.event_rows = []

    def _new_artifact_rows(self) -> list[ArtifactVersion]:
        """Artifact versions not stored yet. A run imported from a RunStoreState may already hold
        the version an appended event writes: the same content is kept once, other content is refused."""
        wanted = {(row.key, row.version): row for row in self.artifact_rows}
        existing = ArtifactVersion.objects.filter(run=self.run, key__in={key for key, _ in wanted})
        for version, body in existing.values_list("version", "body"):
            key = loads(body)["artifactKey"]  # the body's, exact (the column may be cut to its width)
            row = wanted.pop((key, version), None)
            if row is not None and loads(body) != loads(row.body):
                raise ActionError(
                    ErrorCode.INVALID_STATE_TRANSITION,
                    f"artifact {key!r} version {version} already exists with other content",
                )
        return list(wanted.values())

    def save(self, *, keep_rows: bool = False, count_calls: bool = True) -> tuple[int, int]:
        """Store what was collected. With `keep_rows` the last event rows (at most 5,000) stay in
        `event_rows` for the caller to write together with the run row (_save_run_with_events).
        ``count_calls=False``: the caller adds the model calls to the rollups itself
        (:func:`save_new_runs`, one write for many runs)."""
        if not keep_rows:
            self._flush_events()
        if self.artifact_rows:
            ArtifactVersion.objects.bulk_create(self._new_artifact_rows())
        if self.ruleset_rows:
            RuleSetVersion.objects.bulk_create(self.ruleset_rows)
        if self.snapshot_rows:
            RunSnapshot.objects.bulk_create(self.snapshot_rows)
        if self.model_responses:
            if self.fill_cache:  # not for calls ingested from OTLP (see __init__)
                responsecache.fill_from_responses(
                    self.run, self.model_responses, recent=self.events, recent_first=self.first_seq
                )
            if count_calls:
                rollups.count_model_calls(self.run, (event for _, event in self.model_responses))
        if count_calls and (self.model_responses or self.gate_events):
            rollup_metrics.count_metrics(
                self.run,
                (event for _, event in self.model_responses),
                self.gate_events,
                before=self.first_seq,
            )
        self.run.last_seq = self.seq
        return self.first_seq, self.seq


def save_new_runs(appenders: list[Appender]) -> None:
    """Insert many new runs at once, each with the events its Appender recorded (the batch path
    of OTLP ingest, where one request creates a run per trace): ONE insert of the run rows with
    their final projection, then each appender's ``save`` (versions, snapshots, the cache: what
    every append stores, but the rollups), ONE rollup write of all their model calls
    (``rollups.count_model_calls_many``), then ONE insert of every run's event rows.

    This is the batch counterpart of :func:`update_projection` for new runs: what an append
    stores beside its events (per-run work in ``Appender.save``, anything kept per batch such as
    rollups) must be done here too, or kept in ``Appender.save``, which both paths call.

    The runs are new rows built by :func:`new_run_row` (``last_seq`` 0, nobody else holds them);
    their appenders were made before the insert (``run_pk`` None) and get the row ids here.
    Raises ``IntegrityError`` when a run id is already taken (the caller's transaction then holds
    nothing of the batch once rolled back) and ActionError for an invalid run id.
    """
    if not appenders:
        return
    runs = []
    for appender in appenders:
        run = appender.run
        problem = run_id_problem(run.run_id)
        if problem:
            raise ActionError(INVALID_RUN_ID, problem, "run.id")
        set_projection(run, appender.state)
        run.imported_engine = None
        run.last_seq = appender.seq
        runs.append(run)
    _insert_new_runs(runs)
    RunParent.objects.bulk_create(
        RunParent(child=run, parent_run_id=parent, position=i)
        for run in runs
        for i, parent in enumerate(_parents_of(run.run_doc))
    )
    rollups.count_new_runs(runs)  # the run counters, as save_new_run does for one run
    rows: list[tuple] = []
    for appender in appenders:
        pk = appender.run.pk
        appender.run_pk = pk
        if appender.event_rows and appender.event_rows[0][0] != pk:
            appender.event_rows = [(pk, *row[1:]) for row in appender.event_rows]
        appender.save(keep_rows=True, count_calls=False)
        rows.extend(appender.event_rows)
        appender.event_rows = []
    # the model calls of every run in one rollup write (what each save would have added)
    rollups.count_model_calls_many(
        ((a.run, (event for _, event in a.model_responses)) for a in appenders if a.model_responses),
        new_runs=True,
    )
    rollup_metrics.count_metrics_many(
        (a.run, (event for _, event in a.model_responses), a.gate_events)
        for a in appenders
        if a.model_responses or a.gate_events
    )
    insert_events(rows)


@functools.cache
def _insert_fields(model: type[models.Model]) -> tuple:
    """The columns ``model.objects.bulk_create`` writes for a row without a pk (all but the id)."""
    return tuple(f for f in model._meta.concrete_fields if not f.primary_key and not f.generated)


def _run_insert_fields() -> tuple:
    """The columns ``Run.objects.bulk_create`` writes for a row without a pk (all but the id)."""
    return _insert_fields(Run)


def _insert_new_runs(runs: list[Run]) -> None:
    """``Run.objects.bulk_create(runs)`` without the ORM's insert compiler, which spent about
    0.2 ms of Python per row (a run has some thirty columns) -- the largest cost of a new run
    in OTLP ingest after its events (:func:`insert_new_rows`)."""
    insert_new_rows(Run, runs)


def insert_new_rows(model: type[models.Model], objs: list) -> None:
    """``model.objects.bulk_create(objs)`` without the ORM's insert compiler, for new rows of a
    model with an auto id. Same columns, same values: each field's ``pre_save(obj, add=True)``
    (``auto_now`` stamps set on the object, as the ORM does) then its ``get_db_prep_save``,
    what the compiler calls, except where that is the identity (:func:`_value_preps`). One
    multi-row INSERT ... RETURNING per 500 rows; the new ids, assigned in the order of the VALUES
    within the statement, are set on the objects in that order (tests/storage/test_actions.py
    compares the rows with the ORM's). No signals are sent (``bulk_create`` sends none either)."""
    if not objs:
        return
    fields = _insert_fields(model)
    preps = _value_preps(model, connection.vendor)
    quote = connection.ops.quote_name
    table, pk = quote(model._meta.db_table), quote(_column_of(model._meta.pk))
    columns = ", ".join(quote(f.column) for f in fields)
    row_sql = "(" + ", ".join(["%s"] * len(fields)) + ")"
    alias = connection.alias
    for start in range(0, len(objs), _INSERT_VALUES_MAX_ROWS):
        chunk = objs[start : start + _INSERT_VALUES_MAX_ROWS]
        params: list = []
        add = params.append
        for obj in chunk:
            values = obj.__dict__
            for fld, attname, plain, none_ok, width in preps:
                value = values[attname] if attname is not None else fld.pre_save(obj, True)
                if plain is not None and (type(value) is plain or (value is None and none_ok)):
                    add(value if width is None or value is None else fit(to_column(value), width))
                else:
                    add(fld.get_db_prep_save(value, connection))
        values_sql = ", ".join([row_sql] * len(chunk))
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {table} ({columns}) VALUES {values_sql} RETURNING {pk}", params)
            ids = sorted(row[0] for row in cursor.fetchall())
        if len(ids) != len(chunk):
            raise RuntimeError("insert_new_rows needs a database that returns the ids of inserted rows")
        for obj, new_pk in zip(chunk, ids, strict=True):
            obj.pk = new_pk
            obj._state.adding = False
            obj._state.db = alias


# Field classes whose get_db_prep_save returns a value of this type (or None, for a nullable
# column) unchanged, on every backend: Django's own, not subclasses that may convert.
_PLAIN_FIELDS: dict[type, type] = {
    models.CharField: str,
    models.TextField: str,
    models.IntegerField: int,
    models.BigIntegerField: int,
    models.BooleanField: bool,
}


@functools.cache
def _value_preps(model: type, vendor: str) -> tuple:
    """Per column of :func:`_insert_fields`: ``(field, attname, plain, none_ok, width)``.
    ``attname`` is None when the field's ``pre_save`` does more than read the attribute
    (``auto_now`` stamps); ``plain`` is the value type that ``get_db_prep_save`` passes through
    as it is (None: always call it), ``none_ok`` whether None passes too (a nullable column),
    ``width`` a ProtocolCharField's on PostgreSQL (its value spelt and cut, ``column_value``).
    A foreign key's value is its target's (an auto id: an int)."""
    out = []
    for fld in _insert_fields(model):
        attname = fld.attname if type(fld).pre_save is models.Field.pre_save else None
        kind = type(fld)
        width = None
        if isinstance(fld, models.ForeignKey) and type(fld.target_field) in (
            models.AutoField,
            models.BigAutoField,
        ):
            plain: type | None = int
        elif kind is ProtocolCharField:
            plain = str
            width = fld.max_length if vendor == "postgresql" else None
        else:
            plain = _PLAIN_FIELDS.get(kind)
        out.append((fld, attname, plain, fld.null, width))
    return tuple(out)


def artifact_row(run: Run, artifact: dict, seq: int | None) -> ArtifactVersion:
    return ArtifactVersion(
        run=run,
        key=artifact["artifactKey"],
        version=artifact["version"],
        type_id=artifact["typeId"],
        seq=seq,
        body=dumps(artifact),
    )


def set_projection(run: Run, state: RunState) -> None:
    """Put the projection of ``state`` on the run row (saved by the caller, in this transaction), and
    keep the workspace's count of waiting gates (a rollup) in step with it."""
    before = rollups.run_marks(run)
    for name, value in projection_fields(state).items():
        setattr(run, name, value)
    rollups.count_run_change(run, before)


def update_projection(run: Run, state: RunState, *, event_rows: list[tuple] | None = None) -> None:
    """Save the run row with its new projection (and, when given, the event rows not written yet)."""
    set_projection(run, state)
    run.imported_engine = None  # the engine now moves on from whatever snapshot was imported
    if event_rows is None:
        run.save()
    else:
        _save_run_with_events(run, event_rows)


def lock_run(workspace: Workspace, run_id: str) -> Run:
    if is_read_only(workspace):
        raise ActionError(READ_ONLY, "the public demo is a read-only snapshot: its runs never change")
    query = Run.objects.by_run_id(workspace, run_id).select_for_update()
    try:
        if connection.vendor == "postgresql":
            return _get_pipelined(query)
        return query.get()
    except Run.DoesNotExist:
        raise ActionError(ErrorCode.UNKNOWN_RUN, f"no run {run_id!r}") from None


def _get_pipelined(query) -> Run:
    """PostgreSQL: the transaction's BEGIN and the locking SELECT in one round trip (psycopg's
    pipeline mode sends both before waiting), when nothing else ran in the transaction yet."""
    from psycopg.pq import TransactionStatus

    connection.ensure_connection()
    raw = connection.connection
    if raw.info.transaction_status != TransactionStatus.IDLE or raw.autocommit:
        return query.get()
    with raw.pipeline():
        return query.get()


def load_state(run: Run) -> RunState:
    return RunState.from_json(loads(run.state))


FORK_METADATA_KEY = "workbench.fork"


def redaction_policy(state: RunState) -> str | None:
    """The redaction policy a run carries (an imported redacted bundle, or a fork of one): every
    event appended to it is redacted the same way, so nothing the policy removed comes back
    (a replay answered from the response cache included)."""
    return policy_of(state.run)


def is_replay_state(state: RunState) -> bool:
    """Whether the run is a replay fork (read from its own document: no query for other runs)."""
    metadata = state.run.get("metadata")
    if not isinstance(metadata, dict):
        return False
    info = metadata.get(FORK_METADATA_KEY)
    return isinstance(info, dict) and info.get("mode") == "replay"
