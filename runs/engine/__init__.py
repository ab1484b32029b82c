"""The run engine: pure Python, no Django.

``fold(run, events)`` turns a run's events into a :class:`RunState`;
``decide(state, command, ctx)`` turns a command into new events (or an
:class:`EngineError`); ``new_run`` and ``fork_run`` create runs.
"""

from runs.engine.check import check_event
from runs.engine.commands import (
    Annotate,
    AppendEvents,
    BeginStep,
    CancelRun,
    ChangeRuleSet,
    Command,
    CompleteRun,
    CompleteStep,
    Context,
    EndSpan,
    FailRun,
    LogModelIO,
    LogToolCall,
    PatchArtifact,
    RecordError,
    RequestGate,
    ResolveGate,
    SetGatePolicy,
    StartSpan,
    WriteArtifact,
)
from runs.engine.decide import decide
from runs.engine.errors import EngineError
from runs.engine.fold import apply_event, fold
from runs.engine.lifecycle import fork_run, new_run
from runs.engine.state import RunState

__all__ = [
    "Annotate",
    "AppendEvents",
    "BeginStep",
    "CancelRun",
    "ChangeRuleSet",
    "Command",
    "CompleteRun",
    "CompleteStep",
    "Context",
    "EndSpan",
    "EngineError",
    "FailRun",
    "LogModelIO",
    "LogToolCall",
    "PatchArtifact",
    "RecordError",
    "RequestGate",
    "ResolveGate",
    "RunState",
    "SetGatePolicy",
    "StartSpan",
    "WriteArtifact",
    "apply_event",
    "check_event",
    "decide",
    "fold",
    "fork_run",
    "new_run",
]
