"""Markers by what a test does, set at collection (tests/conftest.py): `slow` and `db_differs`.

slow: the test function or any fixture it uses (pytest's closure of them) starts a process. Their
code is read (their bytecode), and so is the code of each function or class of the test suite that
they call, transitively: `Cluster(...)` (tests/live/cluster.py) starts daphne in its methods,
so every test using a fixture that enters a Cluster is slow. A process start is a call that
resolves, in the module's globals, to one of PROCESS_STARTERS. Nothing is hand-listed.

db_differs: the behaviour differs between SQLite and PostgreSQL, so `make test-postgres` runs the
test on PostgreSQL too. What differs, in the code (grep vendor, select_for_update, RawSQL, cursor):
SQL written per vendor (append statements, rollups, search and keyset paths, query plans, JSON
fields and NUL bytes, bulk imports), row locks (select_for_update, SKIP LOCKED claims of the OTLP
queue, import jobs, the outbox, review queues, forks, datasets, tokens, invitations) and what the
two do with concurrent writers, connection settings (pools, replicas). DB_DIFFERS lists the test
files and folders that exercise them, with the reason; besides, any test module that names
PostgreSQL or a database vendor (a test written for one database) is in.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import multiprocessing
import os
import subprocess
import sys
import types
from fnmatch import fnmatch
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

PROCESS_STARTERS: frozenset[object] = frozenset(
    f
    for f in (
        subprocess.Popen,
        subprocess.run,
        subprocess.call,
        subprocess.check_call,
        subprocess.check_output,
        getattr(os, "fork", None),
        getattr(os, "forkpty", None),
        getattr(os, "posix_spawn", None),
        getattr(os, "posix_spawnp", None),
        os.system,
        os.popen,
        getattr(os, "spawnv", None),
        getattr(os, "spawnl", None),
        getattr(os, "execv", None),
        multiprocessing.Process,
        asyncio.create_subprocess_exec,
        asyncio.create_subprocess_shell,
        concurrent.futures.ProcessPoolExecutor,
    )
    if f is not None
)

# Path patterns (fnmatch, from the repository root) -> why their behaviour differs by database.
DB_DIFFERS: dict[str, str] = {
    "tests/storage/*": "storage: append statements, JSON fields, NUL bytes, query plans, rollups' SQL, "
    "retention, search paths, concurrent rollups",
    "tests/telemetry/*": "OTLP ingest and its queue (SKIP LOCKED claims), the run store, ledger sums",
    "tests/api/test_import_*": "imports: bulk inserts per vendor, import jobs claimed under row locks",
    "tests/api/test_big_bundle_upload.py": "the big import path (runs/actions/bigimport.py: vendor SQL)",
    "tests/api/test_runstore*": "the run store's writes and reads (vendor SQL)",
    "tests/api/test_nul_strings.py": "NUL characters: PostgreSQL text refuses them, SQLite keeps them",
    "tests/api/test_idempotency_crash.py": "transactions and unique constraints under a crash",
    "tests/api/test_run_ids_per_workspace.py": "unique constraints and collation of run ids",
    "tests/api/test_commands.py": "the core actions: row locks on the run, revision checks",
    "tests/api/test_fork*": "forks and retention: row locks, bulk copies, deletes",
    "tests/api/test_tokens.py": "tokens: row locks, last-used updates",
    "tests/pages/test_keyset_lists.py": "keyset pagination: ordering and tuple comparison per vendor",
    "tests/pages/test_query_counts.py": "query counts per page (the vendors' query paths differ)",
    "tests/pages/test_ledger_*": "ledger sums and grouping (vendor SQL in runs/selectors/ledger.py)",
    "tests/pages/test_invitations.py": "invitations: row locks (runs/actions/workspaces.py)",
    "tests/pages/test_hostile_ids.py": "hostile ids (NUL, long, unicode) reaching the database",
    "tests/security/test_otlp_deep_json.py": "deep JSON documents in JSON fields (jsonb vs text)",
    "tests/notifications/test_outbox.py": "the outbox: claims under row locks",
    "tests/notifications/test_tasks.py": "task rows (django-tasks-db) claimed per vendor",
    "tests/notifications/test_webhooks_api.py": "webhooks: row locks (runs/actions/webhooks.py)",
    "tests/review/test_queue_actions.py": "review queues: row locks, concurrent claims",
    "tests/evals/test_datasets.py": "datasets: row locks (evals/actions/datasets.py)",
    "tests/evals/test_concurrent_runner.py": "experiments writing from several threads at once",
    "tests/prompts/test_prompt_actions.py": "prompt versions: row locks, unique versions",
    "tests/replay/*": "replays and forks: row locks, bulk copies",
    "tests/ops/test_database_pool.py": "PostgreSQL's connection pool",
    "tests/ops/test_replica_router.py": "read replicas",
    "tests/playground/test_execute.py": "playground executions claimed under row locks",
}
_VENDOR_WORDS = ("postgres", "connection.vendor", "psycopg")


@functools.cache
def _module_names_vendor(path: str) -> bool:
    try:
        text = Path(path).read_text(encoding="utf-8").lower()
    except OSError:
        return False
    return any(word in text for word in _VENDOR_WORDS)


def differs_by_database(item, rel: str) -> bool:
    if any(fnmatch(rel, pattern) for pattern in DB_DIFFERS):
        return True
    if item.get_closest_marker("postgres") is not None:
        return True
    return _module_names_vendor(str(item.fspath))


def _source_file(obj: object) -> str | None:
    code = getattr(obj, "__code__", None)
    if code is not None:
        return code.co_filename
    module = sys.modules.get(getattr(obj, "__module__", ""))
    return getattr(module, "__file__", None)


SUITE = (REPO / "tests", REPO / "sdk" / "python" / "tests")


@functools.cache
def _in_repo(filename: str) -> bool:
    """In the test suite (its helpers too), whose code is followed; the application's is not."""
    path = Path(filename).resolve()
    return any(path.is_relative_to(root) for root in SUITE)


def _ours(obj: object) -> bool:
    """A function or class of the test suite (read and followed), not of the application or a library."""
    filename = _source_file(obj)
    return filename is not None and filename.endswith(".py") and _in_repo(filename)


def _codes(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _functions_of(obj: object) -> list[types.FunctionType]:
    if inspect.isclass(obj):
        found = []
        for value in vars(obj).values():
            value = getattr(value, "__func__", None) or getattr(value, "fget", None) or value
            if inspect.isfunction(value):
                found.append(value)
        return found
    return [obj] if inspect.isfunction(obj) else []


def _referenced(function: types.FunctionType):
    """What the function's code names (``co_names``, nested functions included): its globals
    (``Popen``, ``Cluster``), their attributes named anywhere in it (``subprocess.run``: a function
    naming the subprocess module and ``run`` counts as running a process), and modules imported
    inside it."""
    names: set[str] = set()
    for code in _codes(function.__code__):
        names.update(code.co_names)
    scope = function.__globals__
    for name in names:
        value = scope.get(name, sys.modules.get(name))
        if value is None:
            continue
        yield value
        if inspect.ismodule(value):
            for attr in names:
                inner = getattr(value, attr, None)
                if inner is not None:
                    yield inner


@functools.cache
def _code_starts_process(obj: object) -> bool:
    """Whether ``obj`` (a function or class of the suite) starts a process, or calls one of the
    suite's functions or classes that does (their code objects are read, not run)."""
    followed: list[object] = []
    for function in _functions_of(obj):
        for called in _referenced(function):
            if inspect.isfunction(called):
                called = inspect.unwrap(called)  # @contextmanager, functools.wraps
            try:
                if called in PROCESS_STARTERS:
                    return True
            except TypeError:  # unhashable
                continue
            if (
                called is not obj
                and (inspect.isfunction(called) or inspect.isclass(called))
                and _ours(called)
            ):
                followed.append(called)
    return any(_follow(called) for called in followed)


_stack: set[int] = set()


def _follow(called: object) -> bool:
    key = id(called)
    if key in _stack:  # a cycle: what the outer call finds decides
        return False
    _stack.add(key)
    try:
        return _code_starts_process(called)
    finally:
        _stack.discard(key)


def starts_process(item) -> bool:
    """The test function or one of its fixtures (defined in this repository) starts a process."""
    function = getattr(item, "function", None)
    if function is not None and _follow(function):
        return True
    info = getattr(item, "_fixtureinfo", None)
    for defs in info.name2fixturedefs.values() if info is not None else ():
        for fixturedef in defs:
            func = fixturedef.func
            if _ours(func) and _follow(func):
                return True
    return False
