"""The in-process half of the traced provider clients: recording into a run of this process.

The traced wrappers themselves live in the host SDK (:mod:`workbench_sdk.traced`); this module
adds what needs the server:

    from runs.execution.tracing import tracer_for_session
    from workbench_sdk import traced_anthropic

    claude = traced_anthropic(anthropic.Anthropic(), tracer_for_session(run_session, step_id="parse"))

:class:`SessionSink` records into a :class:`runs.execution.session.RunSession` through the actions (from
async code in Django's thread, closing that thread's stale connections after). A run that is a
replay (``Workbench.replay``) answers from the response cache (``runs.actions.responsecache``), which
the write path fills from every recorded call, the replay's source's answers first
(:func:`replay_for`, :func:`cache_replay`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections, connection
from workbench_sdk.events import RecordedAnswer, recorded_answer
from workbench_sdk.traced import ReplayFn
from workbench_sdk.traced import Tracer as SdkTracer

from runs.actions import responsecache
from runs.models import RunFork
from runs.selectors.prices import price_book, price_row


async def in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """Run blocking work (the database) from async code in Django's thread-sensitive worker."""
    return await sync_to_async(_call_in_thread, thread_sensitive=True)(fn, *args)


def _call_in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    finally:  # the worker thread's database connection is not kept open
        if not connection.in_atomic_block:
            close_old_connections()


class SessionSink:
    """Into a run of this process (``runs.execution.session.RunSession``), through the actions."""

    def __init__(self, session) -> None:
        self.session = session
        self.run_id = session.run_id

    def record(self, events: list[dict]) -> None:
        self.session.append_events(events)

    async def run_blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await in_thread(fn, *args)


def cache_replay(workspace, source_run=None) -> ReplayFn:
    """A ``replay`` answering from the workspace's response cache (``source_run``'s answers first)."""

    def replay(provider: str, model: str, request: dict) -> RecordedAnswer | None:
        keys = responsecache.request_keys(provider, model, request)
        if not keys:
            return None
        entry = responsecache.lookup(workspace, keys["v2"], prefer_run=source_run)
        if entry is None:
            return None
        payload = responsecache.response_fields(entry).get("payload")
        if not isinstance(payload, dict):
            return None  # recorded without the provider's response body: nothing to hand back
        responsecache.record_hit(entry)
        return recorded_answer(payload, responsecache.chunk_fields(entry))

    return replay


def replay_for(session) -> ReplayFn | None:
    """For a run that is a replay (``Workbench.replay``): its source's cached answers; else None."""
    run = session.run
    fork = RunFork.objects.filter(run=run).select_related("source").first()
    if fork is None or fork.mode != "replay":
        return None
    return cache_replay(session.workspace, fork.source)


def tracer_for_session(session, **kwargs: Any) -> SdkTracer:
    """A tracer into a run of this process; a replay run answers from its source's cache."""
    return Tracer.for_session(session, **kwargs)


class Tracer(SdkTracer):
    """The SDK's tracer with ``Tracer.for_session(session)`` (as ``runs.traced.Tracer`` had)."""

    @classmethod
    def for_session(cls, session, **kwargs: Any) -> Tracer:
        """A tracer into a run of this process; a replay run answers from its source's cache."""
        kwargs.setdefault("replay", replay_for(session))
        kwargs.setdefault("prices", BookPrices(session.workspace))
        return cls(SessionSink(session), **kwargs)


class BookPrices(Mapping):
    """The SDK's price table read from the workspace's price book (``runs.selectors.prices``):
    its own model prices, else genai-prices, looked up when a call first needs a model (the
    SDK's tracer applies flat per-million rates: genai-prices' tiers collapse to the base rate)."""

    def __init__(self, workspace) -> None:
        # read now: the tracer prices calls from async code too, where the database is not allowed
        self.book = price_book(workspace)
        self.rows: dict[Any, Any] = {}

    def __getitem__(self, key: Any) -> Any:
        if key not in self.rows:
            provider, model = key if isinstance(key, tuple) else (None, key)
            self.rows[key] = price_row(self.book, provider, model)  # no database: genai-prices is in memory
        if self.rows[key] is None:
            raise KeyError(key)
        return self.rows[key]

    def __len__(self) -> int:
        return 1  # never empty: every model may have a price

    def __iter__(self):
        return iter(k for k, v in self.rows.items() if v is not None)
