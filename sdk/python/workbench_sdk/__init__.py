"""Workbench host SDK: the REST client and traced provider clients, with httpx as the only dependency.

    import workbench_sdk as wb

    gpt = wb.openai(openai.OpenAI())     # recorded inside observed calls
    p = wb.prompt("greeting", label="production").compile(name="Ann")   # cached, recorded with calls

    @wb.observe()
    def pipeline(topic: str) -> str: ...

It never imports the Workbench server (``runs``, ``playground``) nor Django. The LangGraph
adapter is :mod:`workbench_sdk.langgraph` (the ``langgraph`` extra).
"""

from workbench_sdk.cachekey import CacheKeyError, llm_cache_key, llm_cache_keys, request_from_wire
from workbench_sdk.client import WorkbenchAPIError, WorkbenchClient, WorkbenchTransportError
from workbench_sdk.events import REPLAYED_SUMMARY, RecordedAnswer, make_event, now_iso, recorded_answer
from workbench_sdk.observe import (
    anthropic,
    configure,
    current_run,
    current_step,
    observe,
    openai,
    scope,
    tool,
)
from workbench_sdk.pricing import cost_of, price_for
from workbench_sdk.prompts import Prompt, PromptCache, PromptFallbackWarning, prompt
from workbench_sdk.run import Decision, GateClosed, GateHandle, GateTimeout, RemoteRun, gate_payload_key
from workbench_sdk.tools import ToolRun
from workbench_sdk.traced import (
    BudgetExceeded,
    ClientSink,
    Sink,
    Tracer,
    traced_anthropic,
    traced_openai,
    usage_of,
)

__version__ = "0.2.0"

__all__ = [
    "REPLAYED_SUMMARY",
    "CacheKeyError",
    "BudgetExceeded",
    "ClientSink",
    "Prompt",
    "PromptCache",
    "PromptFallbackWarning",
    "Decision",
    "GateClosed",
    "GateHandle",
    "GateTimeout",
    "RecordedAnswer",
    "RemoteRun",
    "Sink",
    "ToolRun",
    "Tracer",
    "WorkbenchAPIError",
    "WorkbenchClient",
    "WorkbenchTransportError",
    "__version__",
    "anthropic",
    "configure",
    "cost_of",
    "current_run",
    "current_step",
    "gate_payload_key",
    "llm_cache_key",
    "llm_cache_keys",
    "make_event",
    "now_iso",
    "observe",
    "openai",
    "price_for",
    "prompt",
    "recorded_answer",
    "request_from_wire",
    "scope",
    "tool",
    "traced_anthropic",
    "traced_openai",
    "usage_of",
]
