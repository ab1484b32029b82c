"""The engine's commands (what a caller asks of a run) and the :class:`Context` they are decided in.

Each command is a frozen dataclass; :func:`runs.engine.decide.decide` turns one into protocol
events, :mod:`runs.engine.check` checks events that arrive from outside, and
:mod:`runs.engine.lifecycle` creates and forks runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runs.protocol.schemas import SchemaRegistry, default_registry
from runs.protocol.values import new_id, now_iso


@dataclass
class Context:
    """What ``decide`` needs from the outside world: a clock, id generation and schemas."""

    now: Callable[[], str] = now_iso
    new_id: Callable[[str], str] = new_id
    schemas: SchemaRegistry = field(default_factory=default_registry)


@dataclass(frozen=True)
class BeginStep:
    step_id: str


@dataclass(frozen=True)
class CompleteStep:
    step_id: str
    ok: bool = True
    error: dict[str, Any] | None = None  # {message, code?} when ok is False


@dataclass(frozen=True)
class RequestGate:
    step_id: str
    gate: str
    reason: str | None = None
    checkpoint: str | None = None


@dataclass(frozen=True)
class WriteArtifact:
    key: str
    type_id: str
    data: Any
    idempotency_key: str | None = None
    step_id: str | None = None
    pointer: dict[str, Any] | None = None
    # The version the writer based its data on (0: the artifact must not exist yet). A write
    # against an older version is refused with PATCH_FAILED, like a patch with a stale fromVersion.
    expected_version: int | None = None


@dataclass(frozen=True)
class PatchArtifact:
    key: str
    from_version: int
    patch: list[dict[str, Any]]
    idempotency_key: str | None = None
    step_id: str | None = None


@dataclass(frozen=True)
class ResolveGate:
    step_id: str
    gate: str
    decision: str
    note: str | None = None
    checkpoint: str | None = None
    edit: WriteArtifact | PatchArtifact | None = None  # only with decision "edited"


@dataclass(frozen=True)
class LogModelIO:
    direction: str
    provider: str | None = None
    model: str | None = None
    usage: dict[str, int] | None = None
    cost: dict[str, Any] | None = None
    duration_ms: float | None = None
    summary: str | None = None
    payload: Any = None
    step_id: str | None = None
    correlation_id: str | None = None


@dataclass(frozen=True)
class LogToolCall:
    name: str
    args: Any = None
    result: Any = None
    step_id: str | None = None
    correlation_id: str | None = None


@dataclass(frozen=True)
class Annotate:
    text: str
    tags: tuple[str, ...] | list[str] | None = None
    step_id: str | None = None


@dataclass(frozen=True)
class RecordError:
    message: str
    code: str | None = None
    fatal: bool = False
    step_id: str | None = None


@dataclass(frozen=True)
class StartSpan:
    name: str
    span_id: str | None = None  # generated when absent
    parent_span_id: str | None = None
    kind: str | None = None
    attributes: dict[str, Any] | None = None
    step_id: str | None = None


@dataclass(frozen=True)
class EndSpan:
    span_id: str
    status: str | None = None
    duration_ms: float | None = None
    attributes: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


@dataclass(frozen=True)
class SetGatePolicy:
    step_id: str
    policy: str


@dataclass(frozen=True)
class ChangeRuleSet:
    rule_set: dict[str, Any]


@dataclass(frozen=True)
class CancelRun:
    reason: str | None = None


@dataclass(frozen=True)
class CompleteRun:
    reason: str | None = None


@dataclass(frozen=True)
class FailRun:
    reason: str
    code: str | None = None


@dataclass(frozen=True)
class AppendEvents:
    events: tuple[dict[str, Any], ...] | list[dict[str, Any]]


Command = (
    BeginStep
    | CompleteStep
    | RequestGate
    | ResolveGate
    | WriteArtifact
    | PatchArtifact
    | LogModelIO
    | LogToolCall
    | Annotate
    | RecordError
    | StartSpan
    | EndSpan
    | SetGatePolicy
    | ChangeRuleSet
    | CancelRun
    | CompleteRun
    | FailRun
    | AppendEvents
)
