"""Workbench host SDK: the REST client and traced provider clients, with httpx as the only dependency.

It never imports the Workbench server (``runs``, ``playground``) nor Django.
"""

from workbench_sdk.cachekey import CacheKeyError, llm_cache_key, llm_cache_keys, request_from_wire
from workbench_sdk.client import WorkbenchAPIError, WorkbenchClient, WorkbenchTransportError
from workbench_sdk.events import REPLAYED_SUMMARY, RecordedAnswer, make_event, now_iso, recorded_answer
from workbench_sdk.pricing import cost_of, price_for
from workbench_sdk.traced import ClientSink, Sink, Tracer, traced_anthropic, traced_openai, usage_of

__version__ = "0.1.0"

__all__ = [
    "REPLAYED_SUMMARY",
    "CacheKeyError",
    "ClientSink",
    "RecordedAnswer",
    "Sink",
    "Tracer",
    "WorkbenchAPIError",
    "WorkbenchClient",
    "WorkbenchTransportError",
    "__version__",
    "cost_of",
    "llm_cache_key",
    "llm_cache_keys",
    "make_event",
    "now_iso",
    "price_for",
    "recorded_answer",
    "request_from_wire",
    "traced_anthropic",
    "traced_openai",
    "usage_of",
]
