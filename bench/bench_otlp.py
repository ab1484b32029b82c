"""OTLP ingest throughput (issue 31): spans/s answered, spans/s queryable, peak memory.

    .venv/bin/python bench/bench_otlp.py [--shape trace10k|traces1000|all] [--repeat 3] [--profile]

Two shapes, each in a fresh process on a fresh SQLite file (the embedded profile) and, when
``PG_URL`` / ``BENCH_PG_URL`` names a server (``make bench`` starts one), on a fresh PostgreSQL
database; no run id anywhere (every trace becomes its own run, created on the fly). The spans are
what instrumentations send (issue 53): a root agent span and chat spans carrying both conventions
(OTel GenAI ``gen_ai.*`` with input / output messages of about 250 and 120 characters, and
OpenInference ``llm.*``, flattened messages, ``input.value`` / ``output.value``), about 2 KB a
span on the wire, no Workbench attribute:

* ``trace10k``: one trace of 10,000 spans (the root agent span and 9,999 chat spans);
* ``traces1000``: 1,000 traces of 10 spans (a root agent span, 9 chat spans).

The spans are built with the OpenTelemetry SDK and encoded by its OTLP encoder into protobuf
``ExportTraceServiceRequest`` bodies of 512 spans (the same bytes an exporter sends), then
POSTed to ``/v1/traces`` through Django's test client (in process: no socket, so the figure
leaves out the HTTP server; the view, auth, decoding, mapping, pricing and appends are all in).

The embedded profile queues spans (``WORKBENCH_OTLP_QUEUE``, runs/actions/otlp_queue.py): the POST
answers once its spans are checked and spooled, and the worker process the server starts stores
them. ``--no-queue`` measures the other way (stored before the answer).

* answered: spans / the time the POSTs took (each answered 200 with everything accepted);
* queryable: spans / the time from the first POST until a query finds every span stored;
* max lag: the longest time from a POST's 2xx until the worker stored its spans (the worker's
  journal, ``WORKBENCH_OTLP_WORKER_JOURNAL``); the target is the window,
  ``WORKBENCH_OTLP_QUEUE_SECONDS`` (5 s); 0 without the queue;
* peak memory: the process's peak RSS after the run, and the growth over the set-up.
* bytes: the database's growth over the run / spans, measured alike on both engines (SQLite: its
  pages in use, page count less the free list, after a WAL checkpoint; PostgreSQL: the sum of
  ``pg_total_relation_size`` over the schema's tables), from a compacted start (``VACUUM`` /
  ``VACUUM FULL`` after the warm-up's rows are deleted); and, beside it, the transcript files'.
  Target: at most half of Phoenix's (4,161-4,576 B on SQLite, 1,899-2,074 on PostgreSQL as
  measured for issue 53). Phoenix's, when installed: its SQLite file's pages in use / spans.
* floor: the bytes per span of the same event rows with their content left out and no index but
  the primary key (:func:`record_floor`): what storing a span as its four protocol events costs
  before any content or lookup index. On PostgreSQL it is 928 B, the whole budget of half of
  Phoenix's (950 B). The JSON line of each run also holds ``relations``: each table's and
  index's growth per span.
* worker up: whether the server process had started its queue worker before the first request
  (``WORKBENCH_OTLP_WORKER_AT_START``, the embedded profile's default).

* cpu: spans / the CPU seconds spent in the POSTs by this process plus, with the queue, the CPU
  seconds of the worker process over the run (steadier than the wall clock on a shared machine;
  every thread counts).
* worker: spans / the CPU seconds of the ingest action alone on bodies decoded beforehand (a second
  pass in the same process): what a worker behind a queue would still spend per span, and from it
  the most a queue could answer for the burst while keeping each span queryable within 1 s of its
  answer (``queue_bound``). It tells whether answering before storing could reach the targets.

Medians of ``--repeat`` runs. Targets: >= 12,000 spans/s (trace10k) and >= 10,000 spans/s
(traces1000) answered. Figures only: nothing is asserted. ``--profile`` prints cProfile's top
functions of one run of each shape instead.

``--compare DIR`` measures another checkout (``DIR/bench/bench_otlp.py``, e.g. ``/work/main``)
alternately with this one, run for run (a shared machine's load falls on both alike), and prints
both medians and the ratios (this checkout / the other).

Side by side with Arize Phoenix, when ``make bench-peers`` installed it in ``var/peers/phoenix``
(or ``WORKBENCH_PHOENIX_PYTHON`` names a Python that has ``arize-phoenix``): each run starts
``phoenix serve`` on loopback with a fresh SQLite file, POSTs the same protobuf bodies to its
``/v1/traces`` over one keep-alive HTTP connection, and measures the same figures (queryable: its
``spans`` table holds every span; cpu: the server's CPU time, every thread, from the first POST
until every span is stored, since it inserts after answering; peak memory: the server's VmHWM).
Its runs alternate with ours, round for round (the figures of both move with the machine: on
2026-12-02 Phoenix answered 20,000-27,000 spans/s within one hour). Then the medians' ratios and
each round's. The ``machine`` line says what the figures depend on besides the code: a fixed
Python loop's time, a file's creation where the runs keep theirs, and the CPU time the
hypervisor took during the runs. Phoenix is
reached over real HTTP and we through Django's in-process test client, so our figures leave out
an HTTP server's parsing (a few percent of a 512-span request). ``--no-peers`` skips Phoenix.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BATCH = 512
TARGETS = {"trace10k": 12_000, "traces1000": 10_000}


def build_bodies(shape: str) -> tuple[list[bytes], int]:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    rng = random.Random(31)
    resource = Resource.create({"service.name": "bench-app"})
    t0 = 1_767_225_600_000_000_000
    spans: list[ReadableSpan] = []

    def ctx(trace_id: int, span_id: int) -> SpanContext:
        return SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(1))

    def make(trace_id: int, span_id: int, parent: int | None, i: int, name: str, attrs: dict) -> ReadableSpan:
        start = t0 + i * 1_000_000
        return ReadableSpan(
            name=name,
            context=ctx(trace_id, span_id),
            parent=ctx(trace_id, parent) if parent else None,
            resource=resource,
            attributes=attrs,
            kind=SpanKind.CLIENT if "gen_ai.operation.name" in attrs else SpanKind.INTERNAL,
            status=Status(StatusCode.OK),
            start_time=start,
            end_time=start + 500_000,
        )

    def chat(i: int) -> tuple[str, dict]:
        return "chat gpt-4o-mini", chat_attributes(rng, i)

    def agent(i: int) -> tuple[str, dict]:
        question = _text(rng, 110)
        return "invoke_agent bench-agent", {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "bench-agent",
            "openinference.span.kind": "AGENT",
            "input.value": question,
            "output.value": _text(rng, 60),
        }

    if shape == "trace10k":
        trace_id = rng.getrandbits(128)
        root = rng.getrandbits(64)
        for i in range(1, 10_000):
            name, attrs = chat(i)
            spans.append(make(trace_id, rng.getrandbits(64), root, i, name, attrs))
        name, attrs = agent(0)
        spans.append(make(trace_id, root, None, 0, name, attrs))  # the root ends last
    else:
        for t in range(1_000):
            trace_id = rng.getrandbits(128)
            root = rng.getrandbits(64)
            for i in range(1, 10):
                name, attrs = chat(t * 10 + i)
                spans.append(make(trace_id, rng.getrandbits(64), root, t * 10 + i, name, attrs))
            name, attrs = agent(t * 10)
            spans.append(make(trace_id, root, None, t * 10, name, attrs))
    bodies = [encode_spans(spans[i : i + BATCH]).SerializeToString() for i in range(0, len(spans), BATCH)]
    return bodies, len(spans)


_WORDS = (
    "the order invoice customer refund shipping account warehouse delivery status policy week "
    "please check whether summary report latency budget model answer question table region "
    "quarter revenue ticket priority escalate yesterday tomorrow contract renewal price"
).split()


def _text(rng: random.Random, size: int) -> str:
    """About ``size`` characters of words (varied: no two spans share their content)."""
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(_WORDS) if rng.random() > 0.1 else str(rng.randrange(10_000))
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:size]


def chat_attributes(rng: random.Random, i: int) -> dict:
    """A chat span as an application instrumented twice sends it (issue 53): OTel GenAI (1.42
    messages) and OpenInference (flattened messages, ``input.value`` / ``output.value``) on the
    same span, a system + user prompt of about 250 characters and an answer of about 120."""
    system, user, answer = _text(rng, 30), _text(rng, 100), _text(rng, 45)
    prompt, completion = 60 + i % 40, 25 + i % 10
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.response.id": f"chatcmpl-{rng.getrandbits(64):016x}",
        "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.usage.input_tokens": prompt,
        "gen_ai.usage.output_tokens": completion,
        "gen_ai.input.messages": json.dumps(
            [
                {"role": "system", "parts": [{"type": "text", "content": system}]},
                {"role": "user", "parts": [{"type": "text", "content": user}]},
            ]
        ),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}]
        ),
        "openinference.span.kind": "LLM",
        "llm.system": "openai",
        "llm.provider": "openai",
        "llm.model_name": "gpt-4o-mini",
        "llm.invocation_parameters": json.dumps({"temperature": 0.2}),
        "llm.token_count.prompt": prompt,
        "llm.token_count.completion": completion,
        "llm.token_count.total": prompt + completion,
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": system,
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": user,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": answer,
        "input.value": json.dumps(
            {"messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
        ),
        "input.mime_type": "application/json",
        "output.value": answer,
        "output.mime_type": "text/plain",
    }


PHOENIX_VENV = ROOT / "var" / "peers" / "phoenix"


def phoenix_python() -> str | None:
    named = os.environ.get("WORKBENCH_PHOENIX_PYTHON")
    if named:
        return named
    python = PHOENIX_VENV / "bin" / "python"
    return str(python) if python.exists() else None


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _vm_hwm_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def _cpu_seconds(pid: int) -> float:
    """The CPU time (user + system, every thread) a process has used so far, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def _phoenix_version(python: str) -> str:
    out = subprocess.run(
        [python, "-c", "import phoenix; print(phoenix.__version__)"], capture_output=True, text=True
    )
    return out.stdout.strip() or "?"


def phoenix_run(python: str, bodies: list[bytes], total: int) -> dict:
    """One measured run against a fresh Phoenix server (SQLite), same bodies as ours."""
    import http.client
    import sqlite3

    with tempfile.TemporaryDirectory() as tmp:
        port, grpc = _free_port(), _free_port()
        db = Path(tmp) / "phoenix.db"
        env = {
            **os.environ,
            "PHOENIX_WORKING_DIR": tmp,
            "PHOENIX_SQL_DATABASE_URL": f"sqlite:///{db}",
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(port),
            "PHOENIX_GRPC_PORT": str(grpc),
            "PHOENIX_TELEMETRY_ENABLED": "false",
        }
        log = open(Path(tmp) / "phoenix.log", "wb")  # noqa: SIM115 (closed below)
        server = subprocess.Popen(
            [python, "-m", "phoenix.server.main", "serve"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            deadline = time.monotonic() + 180
            while True:
                if server.poll() is not None:
                    log.close()
                    raise RuntimeError("phoenix exited: " + (Path(tmp) / "phoenix.log").read_text()[-2000:])
                try:
                    probe = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                    probe.request("GET", "/healthz")
                    if probe.getresponse().status == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("phoenix did not start within 180 s")
                time.sleep(0.5)
            rss_before = _vm_hwm_mb(server.pid)
            cpu_before = _cpu_seconds(server.pid)
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            refused = 0
            spent = 0.0
            first = time.perf_counter()
            for body in bodies:
                started = time.perf_counter()
                conn.request(
                    "POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"}
                )
                answer = conn.getresponse()
                answer.read()
                spent += time.perf_counter() - started
                if answer.status // 100 != 2:
                    refused += 1
            stored = 0
            deadline = time.monotonic() + 600
            reader = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
            while time.monotonic() < deadline:
                try:
                    stored = reader.execute("SELECT count(*) FROM spans").fetchone()[0]
                except sqlite3.OperationalError:
                    stored = 0
                if stored >= total:
                    break
                time.sleep(0.05)
            queryable = time.perf_counter() - first
            cpu = _cpu_seconds(server.pid) - cpu_before  # answering and inserting (it inserts later)
            try:  # best effort: the page count a reader sees includes the WAL's pages anyway
                reader.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.OperationalError:  # a read-only connection may not (disk I/O error)
                pass
            page = reader.execute("PRAGMA page_size").fetchone()[0]
            used = (
                reader.execute("PRAGMA page_count").fetchone()[0]
                - reader.execute("PRAGMA freelist_count").fetchone()[0]
            )
            reader.close()
            return {
                "spans": total,
                "stored": stored,
                "refused_posts": refused,
                "answered": total / spent,
                "queryable": total / queryable if stored >= total else float("nan"),
                "cpu": total / cpu if stored >= total and cpu > 0 else float("nan"),
                "peak_rss_mb": _vm_hwm_mb(server.pid),
                "growth_mb": _vm_hwm_mb(server.pid) - rss_before,
                "bytes_per_span": used * page / total,  # with its empty schema's pages (small)
            }
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            log.close()


def database_bytes() -> int:
    """The bytes the database holds now, measured alike on both engines after a compaction of
    what deletes left: SQLite, its pages in use (page count less the free list, after a WAL
    checkpoint); PostgreSQL, ``pg_total_relation_size`` (rows, TOAST, indexes) summed over the
    tables of the schema, after ``VACUUM FULL`` when ``compact``."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            cursor.execute("PRAGMA page_size")
            page = cursor.fetchone()[0]
            cursor.execute("PRAGMA page_count")
            pages = cursor.fetchone()[0]
            cursor.execute("PRAGMA freelist_count")
            return (pages - cursor.fetchone()[0]) * page
        cursor.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'm', 'p')"
        )
        return int(cursor.fetchone()[0])


def relation_bytes() -> dict[str, int]:
    """The bytes each table and index holds now (SQLite: ``dbstat``'s pages; PostgreSQL:
    ``pg_relation_size`` of each table with its TOAST, and of each index), for the breakdown."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name")
        else:
            cursor.execute(
                "SELECT c.relname, pg_relation_size(c.oid) + CASE WHEN c.reltoastrelid = 0 THEN 0 "
                "ELSE pg_total_relation_size(c.reltoastrelid) END FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'i')"
            )
        return {name: int(size) for name, size in cursor.fetchall()}


def record_floor(total: int) -> float:
    """The bytes per span of the stored events without their content: the same rows (every column
    but ``body``, which is left empty) copied into a new table that has only the primary key, no
    other index, compacted. What storing a span as its protocol events costs before a byte of
    content, a search index or a lookup index (issue 53: on PostgreSQL it alone is above half of
    Phoenix's bytes per span)."""
    from django.db import connection

    from runs.models import Event

    table = Event._meta.db_table
    columns = [f.column for f in Event._meta.concrete_fields]
    selected = ", ".join("''" if c == "body" else c for c in columns)
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS bench_record_floor")
        cursor.execute(f"CREATE TABLE bench_record_floor AS SELECT {selected} FROM {table}")
        if connection.vendor == "sqlite":  # a table made by a query has no key: a unique index
            cursor.execute("CREATE UNIQUE INDEX bench_record_floor_key ON bench_record_floor (run_id, seq)")
            cursor.execute("VACUUM")
            cursor.execute(
                "SELECT sum(pgsize) FROM dbstat WHERE name IN ('bench_record_floor', 'bench_record_floor_key')"
            )
        else:
            cursor.execute("ALTER TABLE bench_record_floor ADD PRIMARY KEY (run_id, seq)")
            cursor.execute("VACUUM FULL bench_record_floor")
            cursor.execute("SELECT pg_total_relation_size('bench_record_floor')")
        size = int(cursor.fetchone()[0])
        cursor.execute("DROP TABLE bench_record_floor")
    return size / total


def compact_database() -> None:
    """Give back what the warm-up's deletes left (so the growth counts new pages only)."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("VACUUM")
        else:
            cursor.execute("VACUUM FULL")


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def child(shape: str, profile: bool) -> None:
    """One measured run in this fresh process (DATABASE_URL points at a new SQLite file)."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
    os.environ["WORKBENCH_RATE_LIMIT_PER_MINUTE"] = "100000000"
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from django.test import Client

    # workbench.asgi: what the server process loads before its first request (daphne imports it).
    # The receiver here is the server's request path, so its start-up heap is settled as the
    # server's is (runs/telemetry/gc_tuning.py) and its queue resumed (nothing is queued yet).
    import workbench.asgi  # noqa: F401
    from accounts.tokens import create_token
    from runs.actions.otlp_queue import Spool
    from runs.actions.workspaces import get_or_create_workspace
    from runs.models import Event, Run
    from runs.telemetry.otlp_worker import stop_worker, worker_pid

    queued = settings.WORKBENCH_OTLP_QUEUE
    worker_at_start = worker_pid() is not None  # the server started its worker before any request
    bodies, total = build_bodies(shape)
    workspace = get_or_create_workspace("bench")
    secret = create_token(workspace=workspace, name="bench", scopes=["read", "write"]).secret
    client = Client()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {secret}"}
    spool = Spool()

    def drained() -> None:  # the queue's worker stored everything queued
        while queued and spool.pending_spans():
            time.sleep(0.002)

    # warm-up: two requests on other traces (imports, the price snapshot, the queue's worker
    # started and its rate measured)
    warm, _ = build_bodies("traces1000")
    for body in warm[:2]:
        client.post("/v1/traces", body, content_type="application/x-protobuf", secure=True, **headers)
    drained()
    Event.objects.all().delete()
    Run.unscoped.all().delete()
    compact_database()
    db_before = database_bytes()
    relations_before = relation_bytes()
    transcripts = Path(settings.WORKBENCH_TRANSCRIPT_DIR)
    transcripts_before = _dir_bytes(transcripts)
    journal = Path(os.environ.get("WORKBENCH_OTLP_WORKER_JOURNAL", "/nonexistent"))
    journal_before = len(journal.read_text().splitlines()) if journal.exists() else 0
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    cpu = [0.0]
    answers: list[float] = []  # wall-clock time of each 2xx

    def post_all() -> float:
        spent = 0.0
        for body in bodies:
            started, cpu_started = time.perf_counter(), time.process_time()
            response = client.post(
                "/v1/traces", body, content_type="application/x-protobuf", secure=True, **headers
            )
            spent += time.perf_counter() - started
            cpu[0] += time.process_time() - cpu_started
            answers.append(time.time())
            if response.status_code != 200 or response.content:
                raise SystemExit(f"unexpected answer {response.status_code}: {response.content[:200]!r}")
        return spent

    if profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        post_all()
        profiler.disable()
        if os.environ.get("BENCH_PROFILE_OUT"):  # the whole profile, for pstats
            profiler.dump_stats(f"{os.environ['BENCH_PROFILE_OUT']}.{shape}")
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(35)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        return
    pid = worker_pid()
    worker_cpu = _cpu_seconds(pid) if pid else 0.0
    first = time.perf_counter()
    answered = post_all()
    drained()
    stored = Event.objects.filter(run__workspace=workspace, type="span_started").count()
    queryable = time.perf_counter() - first
    worker_cpu = (_cpu_seconds(pid) - worker_cpu) if pid else 0.0
    if stored != total:
        raise SystemExit(f"{stored} of {total} spans stored")
    bytes_per_span = (database_bytes() - db_before) / total
    relations = {
        name: round((size - relations_before.get(name, 0)) / total)
        for name, size in relation_bytes().items()
        if size - relations_before.get(name, 0) >= total
    }
    transcript_per_span = (_dir_bytes(transcripts) - transcripts_before) / total
    floor_per_span = record_floor(total)
    # The lag of each request: from its 2xx until the worker stored its spans (the worker takes
    # the bodies in the order they were queued; one sender here, so body i is the i-th line).
    lags = [0.0]
    if queued and journal.exists():
        # the worker removes a stored body from the spool, then writes its line: wait for the lines
        deadline = time.monotonic() + 10
        while True:
            lines = journal.read_text().splitlines()[journal_before:]
            if len(lines) >= len(answers) or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        lags = [float(line.split()[-1]) - answer for line, answer in zip(lines, answers, strict=True)]
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    runs = Run.unscoped.filter(workspace=workspace).count()
    stop_worker()
    worker = _worker_rate(workspace, bodies)
    print(
        json.dumps(
            {
                "spans": total,
                "runs": runs,
                "answered": total / answered,
                "queryable": total / queryable,
                "cpu": total / (cpu[0] + worker_cpu),
                "receiver_cpu": total / cpu[0],
                "queue_worker_cpu": total / worker_cpu if worker_cpu else 0.0,
                "peak_rss_mb": rss_after / 1024,
                "growth_mb": (rss_after - rss_before) / 1024,
                "worker": worker,
                "queued": queued,
                "max_lag": max(lags),
                "bytes_per_span": bytes_per_span,
                "transcript_per_span": transcript_per_span,
                "floor_per_span": floor_per_span,
                "relations": dict(sorted(relations.items(), key=lambda item: -item[1])),
                "worker_at_start": worker_at_start,
                "database": settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1],
            }
        )
    )


# Each run's directory (its SQLite file, its ~1,000 transcript files) is removed when the bench ends,
# not after the run, so that a run does not follow its predecessor's clean-up: on this machine's ext4,
# which has no journal, the inode allocator checks recently deleted inodes (perf: find_inode_bit ->
# recently_deleted), and creating a file there cost 30-550 us of kernel time (2026-11-27) depending on
# what had been deleted lately. The directory is under var/bench/, where the embedded profile keeps
# its files (var/), not /tmp: on the machine of 2026-11-27 (fourth session) creating a file in a new
# directory under /tmp cost 570-640 us, under /work 16-22 us (same ext4 file system; 1,000 creates).
_RUN_DIRS: list[tempfile.TemporaryDirectory] = []  # made on first use (not in the --child processes)


def _run_dir() -> str:
    if not _RUN_DIRS:
        (ROOT / "var" / "bench").mkdir(parents=True, exist_ok=True)
        _RUN_DIRS.append(tempfile.TemporaryDirectory(prefix="otlp-", dir=ROOT / "var" / "bench"))
    return tempfile.mkdtemp(dir=_RUN_DIRS[0].name)


def _pg_admin_url() -> str | None:
    url = os.environ.get("LIVE_PG_ADMIN_URL")
    if url:
        return url
    bench = os.environ.get("BENCH_PG_URL") or os.environ.get("PG_URL")
    return bench.rsplit("/", 1)[0] + "/postgres" if bench else None


_PG_DATABASES: list[str] = []  # dropped when the bench ends


def _fresh_pg_database() -> str:
    """A new empty database on the PostgreSQL server of ``PG_URL`` (dropped at exit)."""
    import atexit

    import psycopg

    admin = _pg_admin_url()
    assert admin is not None
    name = f"bench_otlp_{os.getpid()}_{len(_PG_DATABASES)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    if not _PG_DATABASES:
        atexit.register(_drop_pg_databases)
    _PG_DATABASES.append(name)
    return admin.rsplit("/", 1)[0] + "/" + name


def _drop_pg_databases() -> None:
    import psycopg

    admin = _pg_admin_url()
    with psycopg.connect(admin, autocommit=True) as conn:
        for name in _PG_DATABASES:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _one_run(shape: str, profile: bool, root: Path = ROOT, database: str = "sqlite") -> dict | None:
    """One measured run in a fresh process of the checkout at ``root``, on a fresh SQLite file
    (or, ``database="postgresql"``, a fresh PostgreSQL database)."""
    tmp = _run_dir()
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp}/bench.sqlite3",
        "WORKBENCH_VAR_DIR": tmp,
        "WORKBENCH_OTLP_WORKER_JOURNAL": f"{tmp}/journal",
        "WORKBENCH_OTLP_QUEUE": "1" if QUEUE["on"] else "0",
        "WORKBENCH_OTLP_WORKER_INPROCESS": "1" if QUEUE["on"] else "0",
        "WORKBENCH_OTLP_WORKER_AT_START": "1",  # the embedded default, said explicitly
    }
    if database == "postgresql":
        env["DATABASE_URL"] = _fresh_pg_database()
    out = subprocess.run(
        [sys.executable, str(root / "bench" / "bench_otlp.py"), "--child", shape]
        + (["--profile"] if profile else []),
        env=env,
        capture_output=not profile,
        text=True,
        cwd=root,
    )
    if profile:
        return None
    if out.returncode != 0:
        print(out.stdout, out.stderr, file=sys.stderr)
        raise SystemExit(out.returncode)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _worker_rate(workspace, bodies: list[bytes]) -> float:
    """Spans per CPU second of the ingest action alone (routing, mapping, pricing, appends, the
    post-commit sinks) on bodies decoded beforehand: what a worker behind a queue would still do
    per span if the request only decoded, checked and queued. Measured on a second pass over the
    same bodies with the first pass's rows deleted (the same traces are new again)."""
    from runs.actions.otlp import do_ingest_spans
    from runs.models import Run
    from runs.telemetry.otlp_ingest import spans_from_protobuf

    Run.unscoped.filter(workspace=workspace).delete()
    decoded = [spans_from_protobuf(body) for body in bodies]
    total = sum(len(spans) for spans in decoded)
    started = time.process_time()
    for spans in decoded:
        do_ingest_spans(workspace=workspace, spans=spans)
    return total / (time.process_time() - started)


def queue_bound(spans: int, worker: float, window: float = 1.0) -> float:
    """The most spans/s a queue in front of a worker at ``worker`` spans/s could answer for a burst of
    ``spans`` while every span stays queryable within ``window`` seconds of its answer: the last
    answer can come no sooner than ``spans / worker - window`` seconds after the first span (a
    request that only queues costs nothing in this bound, so it flatters the queue)."""
    last_answer = spans / worker - window
    return float("inf") if last_answer <= 0 else spans / last_answer


_KEYS = ("answered", "queryable", "cpu", "peak_rss_mb", "growth_mb", "worker", "max_lag", "receiver_cpu",
         "queue_worker_cpu", "bytes_per_span", "transcript_per_span", "floor_per_span")  # fmt: skip
QUEUE = {"on": True}  # --no-queue: the request stores its spans before answering
POSTGRES = {"on": False}  # also on PostgreSQL (PG_URL or BENCH_PG_URL set; --no-postgres skips it)


def compare(shape: str, repeat: int, other: Path) -> None:
    """This checkout and ``other`` alternately, ``repeat`` runs each; medians and ratios."""
    ours, theirs = [], []
    for i in range(repeat):
        pair = [(ours, ROOT), (theirs, other)]
        for results, root in pair if i % 2 == 0 else reversed(pair):
            results.append(_one_run(shape, False, root))
    med = {key: statistics.median(r.get(key, 0.0) for r in ours) for key in _KEYS}
    base = {key: statistics.median(r.get(key, 0.0) for r in theirs) for key in _KEYS}
    print(f"{shape}: this checkout vs {other} (alternating, median of {repeat} each)")
    for key, unit in (("answered", "spans/s"), ("queryable", "spans/s"), ("cpu", "spans/CPU s"),
                      ("receiver_cpu", "spans/CPU s"), ("queue_worker_cpu", "spans/CPU s"),
                      ("peak_rss_mb", "MB"), ("worker", "spans/CPU s")):  # fmt: skip
        print(
            f"  {key:<11} {med[key]:>9,.0f} vs {base[key]:>9,.0f} {unit:<12} ratio {med[key] / base[key]:.2f}x"
        )
    print(f"  max lag     {med['max_lag']:>9.2f} vs {base['max_lag']:>9.2f} s (from a 2xx until stored)")


def _cpu_ticks() -> tuple[int, int]:
    """(steal, total) jiffies of the whole machine so far, from /proc/stat."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return 0, 0
    return (fields[7] if len(fields) > 7 else 0), sum(fields[:8])


def machine_conditions() -> dict:
    """What the figures depend on besides the code, measured now: a fixed pure-Python workload's
    time (the core's speed as this process gets it) and the cost of creating a file where the runs
    keep theirs (the worker creates a transcript file per new run; on this machine's ext4 it has
    ranged from 16 us to 750 us, see docs/notes/scaling-diary.md)."""
    started = time.perf_counter()
    table: dict[int, int] = {}
    for i in range(400_000):
        table[i & 4095] = table.get(i & 4095, 0) + i
    python_ms = (time.perf_counter() - started) * 1000
    folder = tempfile.mkdtemp(dir=_run_dir())
    started = time.perf_counter()
    for i in range(500):
        fd = os.open(os.path.join(folder, f"f{i}"), os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600)
        os.write(fd, b"x" * 200)
        os.close(fd)
    create_us = (time.perf_counter() - started) / 500 * 1e6
    return {"python_ms": python_ms, "create_us": create_us}


def _conditions_line(before: dict, steal: tuple[int, int]) -> str:
    steal_share = steal[0] / steal[1] if steal[1] else 0.0
    return (
        f"  machine    a fixed Python loop {before['python_ms']:.0f} ms, a file created in "
        f"{before['create_us']:.0f} us, {steal_share:.1%} of the CPU time stolen by the host during the runs"
    )


def run_shape(shape: str, repeat: int, profile: bool, peers: bool) -> None:
    """Our runs and, when Phoenix is installed, Phoenix's, alternately run for run (ours first in
    even rounds, theirs first in odd ones: a shared machine's slow minutes fall on both alike);
    medians, and each round's ratio."""
    if profile:
        _one_run(shape, profile)
        return
    python = phoenix_python() if peers else None
    bodies, total = build_bodies(shape) if python else ([], 0)
    conditions = machine_conditions()
    steal_before = _cpu_ticks()
    results: list[dict] = []
    theirs: list[dict] = []
    failure = None
    for i in range(repeat):
        turns = ["ours", "theirs"] if python and failure is None else ["ours"]
        for turn in turns if i % 2 == 0 else reversed(turns):
            if turn == "ours":
                results.append(_one_run(shape, profile))
                continue
            try:
                theirs.append(phoenix_run(python, bodies, total))
            except (RuntimeError, OSError) as exc:
                failure = str(exc)
    pg_results = (
        [_one_run(shape, False, database="postgresql") for _ in range(repeat)] if POSTGRES["on"] else []
    )
    steal_after = _cpu_ticks()
    steal = (steal_after[0] - steal_before[0], steal_after[1] - steal_before[1])
    med = {key: statistics.median(r.get(key, 0.0) for r in results) for key in _KEYS}
    first = results[0]
    mode = "queued (a worker process stores)" if first["queued"] else "stored before answering (no queue)"
    print(
        f"{shape}: {first['spans']} spans into {first['runs']} run(s), {BATCH}-span protobuf batches, SQLite, "
        f"{mode} (median of {len(results)})\n"
        f"  answered   {med['answered']:>9,.0f} spans/s   (target >= {TARGETS[shape]:,})   each run: "
        + ", ".join(f"{r['answered']:,.0f}" for r in results)
        + "\n"
        f"  queryable  {med['queryable']:>9,.0f} spans/s\n"
        f"  max lag    {med['max_lag']:>9.2f} s         from a 2xx until its spans were stored (target <= WORKBENCH_OTLP_QUEUE_SECONDS, 5 s); each "
        "run: " + ", ".join(f"{r['max_lag']:.2f}" for r in results) + "\n"
        f"  cpu        {med['cpu']:>9,.0f} spans per CPU second (receiver {med['receiver_cpu']:,.0f}, queue's worker "
        f"process {med['queue_worker_cpu']:,.0f})\n"
        f"  peak RSS   {med['peak_rss_mb']:>9,.0f} MB      (+{med['growth_mb']:,.0f} MB during the run)\n"
        f"  bytes      {med['bytes_per_span']:>9,.0f} B per span in the database (pages in use, growth / spans; "
        f"target <= half of Phoenix's), + {med['transcript_per_span']:,.0f} B per span in transcript files\n"
        f"  floor      {med['floor_per_span']:>9,.0f} B per span: the same event rows with no content and no index "
        "but their key\n"
        f"  worker up  {'before the first request' if all(r['worker_at_start'] for r in results) else 'NOT before the first request'}\n"
        f"  worker     {med['worker']:>9,.0f} spans per CPU second of the ingest action alone (no HTTP, no "
        f"decoding)\n"
        f"             behind a queue it would bound a burst of {first['spans']:,} spans to "
        f"{queue_bound(first['spans'], med['worker']):,.0f} spans/s answered, queryable within 1 s\n"
        + _conditions_line(conditions, steal)
    )
    if pg_results:
        pg = {key: statistics.median(r[key] for r in pg_results) for key in ("answered", "queryable", "bytes_per_span",
                                                                              "transcript_per_span", "floor_per_span")}  # fmt: skip
        print(
            f"  PostgreSQL (median of {len(pg_results)}, same queue and worker): answered {pg['answered']:,.0f} spans/s, "
            f"queryable {pg['queryable']:,.0f} spans/s\n"
            f"  bytes (PG) {pg['bytes_per_span']:>9,.0f} B per span in the database (pg_total_relation_size sums, growth "
            f"/ spans), + {pg['transcript_per_span']:,.0f} B per span in transcript files\n"
            f"  floor (PG) {pg['floor_per_span']:>9,.0f} B per span: the same event rows with no content and no index "
            "but their key"
        )
    elif POSTGRES["on"] is False and _pg_admin_url() is None:
        print("  PostgreSQL: not measured (no PG_URL: `make bench` starts the services)")
    if python is None:
        if peers:
            print("  Phoenix: not installed (make bench-peers installs it in var/peers/phoenix)")
        return
    if failure is not None or not theirs:
        print(f"  Phoenix: could not be measured: {failure}")
        return
    rounds = list(zip(results, theirs, strict=True))  # round i: our run i and theirs
    pk = ("answered", "queryable", "cpu", "peak_rss_mb", "growth_mb", "bytes_per_span")
    ph = {key: statistics.median(r[key] for r in theirs) for key in pk}
    refused = max(r["refused_posts"] for r in theirs)
    stored = min(r["stored"] for r in theirs)
    print(
        f"  Phoenix (arize-phoenix {_phoenix_version(python)}, SQLite, over loopback HTTP, median of {len(theirs)}, "
        "run alternately with ours):\n"
        f"    answered   {ph['answered']:>9,.0f} spans/s   ours/theirs {med['answered'] / ph['answered']:.2f}x   "
        "each round: " + ", ".join(f"{o['answered'] / t['answered']:.2f}x" for o, t in rounds) + "\n"
        f"    queryable  {ph['queryable']:>9,.0f} spans/s   ours/theirs {med['queryable'] / ph['queryable']:.2f}x\n"
        f"    cpu        {ph['cpu']:>9,.0f} spans per CPU second of the server, until stored   "
        f"ours/theirs {med['cpu'] / ph['cpu']:.2f}x\n"
        f"    peak RSS   {ph['peak_rss_mb']:>9,.0f} MB      theirs/ours {ph['peak_rss_mb'] / med['peak_rss_mb']:.2f}x\n"
        f"    bytes      {ph['bytes_per_span']:>9,.0f} B per span (SQLite)   ours/theirs "
        f"{med['bytes_per_span'] / ph['bytes_per_span']:.2f}x\n"
        f"    kept {stored:,} of {total:,} spans; {refused} POST(s) answered other than 2xx"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="all", choices=("all", *TARGETS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--child")
    parser.add_argument("--no-peers", action="store_true", help="do not measure Phoenix beside us")
    parser.add_argument("--compare", type=Path, help="another checkout, measured alternately with this one")
    parser.add_argument(
        "--no-queue", action="store_true", help="store before answering (WORKBENCH_OTLP_QUEUE=0)"
    )
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    args = parser.parse_args()
    QUEUE["on"] = not args.no_queue
    POSTGRES["on"] = not args.no_postgres and _pg_admin_url() is not None
    if args.child:
        child(args.child, args.profile)
        return
    for shape in TARGETS if args.shape == "all" else (args.shape,):
        if args.compare:
            compare(shape, args.repeat, args.compare.resolve())
        else:
            run_shape(shape, args.repeat, args.profile, peers=not args.no_peers)


if __name__ == "__main__":
    main()
