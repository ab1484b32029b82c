"""Request and response types of the REST API; the OpenAPI document is generated from them.

Protocol objects (runs, events, artifacts, the run store state) are described here for the
OpenAPI document and checked structurally; their full validation is the protocol's and the
engine's (the one write path), which answer with protocol error codes.
"""

from __future__ import annotations

from typing import Any, Literal

from ninja import Schema
from pydantic import ConfigDict, Field

from runs.protocol.validate import EVENT_TYPES

GatePolicy = Literal["AUTO", "PAUSE_BEFORE", "PAUSE_AFTER", "CHECKPOINT"]
Gate = Literal["PAUSE_BEFORE", "PAUSE_AFTER", "CHECKPOINT"]
Decision = Literal["approved", "rejected", "edited"]
RunStatus = Literal["running", "completed", "failed", "cancelled"]
EventType = Literal[EVENT_TYPES]  # type: ignore[valid-type]  # the protocol's own list (runs.protocol.validate): a tuple mypy cannot read as values


class ProtocolObject(Schema):
    """Protocol objects tolerate keys they do not know (as the reference does on parse)."""

    model_config = ConfigDict(extra="allow")


class ErrorOut(Schema):
    error: str = Field(description="What went wrong, for people.")
    code: str = Field(
        description="A protocol error code (UNKNOWN_RUN ...) or an HTTP-level one (RATE_LIMITED ...)."
    )
    details: dict[str, Any] | None = Field(
        default=None,
        description="Particulars for machines, when the error has them (e.g. REPLAY_DATA_EXPIRED: "
        "sourceRunId, fromSeq, retentionBoundary, unavailableSeqs).",
    )


class HealthOut(Schema):
    status: Literal["ok"]
    protocolVersion: str


# ---------------------------------------------------------------------------------------------
# Protocol shapes


class Edge(ProtocolObject):
    id: str
    from_: str = Field(alias="from")
    to: str


class Step(ProtocolObject):
    id: str
    title: str | None = None
    description: str | None = None
    gatePolicy: GatePolicy = "AUTO"
    inputs: list[str] = []
    outputs: list[str] = []


class WorkflowSpec(ProtocolObject):
    id: str
    version: int = Field(ge=0)
    title: str | None = None
    steps: list[Step] = Field(min_length=1)
    edges: list[Edge] = []


class RunInstance(ProtocolObject):
    id: str
    workflowId: str
    workflowVersion: int
    workflowSnapshot: WorkflowSpec
    startedAt: str
    endedAt: str | None = None
    status: RunStatus
    context: dict[str, Any] | None = None
    subject: dict[str, str] | None = None
    metadata: dict[str, Any] | None = None
    tags: list[str] | None = None
    annotations: list[dict[str, Any]] | None = None


class TraceEvent(ProtocolObject):
    """A protocol 1.0.0 trace event; the fields beyond these depend on ``type`` (see PROTOCOL.md)."""

    id: str
    runId: str
    ts: str
    type: EventType
    stepId: str | None = None
    correlationId: str | None = None


class ArtifactVersion(ProtocolObject):
    artifactKey: str
    typeId: str
    version: int = Field(ge=1)
    createdAt: str
    pointer: dict[str, Any] | None = None
    data: Any = None


class RuleSet(ProtocolObject):
    id: str
    ruleSchemaId: str
    rules: list[dict[str, Any]]


class RunStoreState(ProtocolObject):
    """What the reference's HTTP run repository PUTs and GETs (maps travel as [key, value] pairs)."""

    revision: int = Field(ge=0)
    run: RunInstance
    trace: list[TraceEvent]
    artifactsByKey: list[tuple[str, ArtifactVersion]] = []
    ruleSetsById: list[tuple[str, RuleSet]] = []
    stepStatus: list[tuple[str, Literal["pending", "running", "completed", "failed"]]] = []
    gateState: list[tuple[str, dict[str, Any]]] = []
    idempotency: list[tuple[str, dict[str, Any]]] = []


class BundleIntegrity(ProtocolObject):
    """``sha256`` (the integrity hash of the canonical body) and, on exports of this server,
    ``attestations``: DSSE envelopes signing an in-toto statement about that hash."""

    sha256: str
    attestations: list[dict[str, Any]] | None = None


class DsseSignature(Schema):
    keyid: str
    sig: str


class DsseEnvelope(Schema):
    """A DSSE v1 envelope (the detached signature of an export)."""

    payloadType: str
    payload: str
    signatures: list[DsseSignature]


class RunBundle(ProtocolObject):
    protocolVersion: str
    run: RunInstance
    trace: list[TraceEvent]
    artifacts: list[ArtifactVersion]
    ruleSets: list[RuleSet]
    engine: dict[str, Any] | None = None
    integrity: BundleIntegrity | None = None


class SavedRunMeta(Schema):
    id: str
    workflowId: str
    startedAt: str
    endedAt: str | None = None
    status: RunStatus
    tags: list[str] | None = None


# ---------------------------------------------------------------------------------------------
# Commands


TITLE_DOC = (
    'What tells the run apart in lists (1..300 characters). Stored in `run.metadata["workbench.title"]` '
    "(the protocol has no title field), so bundles carry it; without it a run is called by its workflow."
)


class StartRunIn(Schema):
    workflow: dict[str, Any] = Field(description="A WorkflowSpec (validated by the engine).")
    runId: str | None = Field(default=None, min_length=1, max_length=200)
    title: str | None = Field(default=None, description=TITLE_DOC)
    subject: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    tags: list[str] | None = None
    context: dict[str, Any] | None = None


class RunUpdateIn(Schema):
    title: str = Field(description=TITLE_DOC)


class AppendEventsIn(Schema):
    events: list[dict[str, Any]] = Field(
        min_length=1, description="Protocol trace events, appended in order and validated by the engine."
    )


class GateEditIn(Schema):
    """The edit that comes with decision "edited": a new artifact version (data) or a JSON Patch."""

    artifactKey: str = Field(min_length=1)
    typeId: str | None = Field(default=None, description="Required with data (a full write).")
    data: Any = None
    fromVersion: int | None = Field(default=None, ge=1, description="Required with patch.")
    patch: list[dict[str, Any]] | None = None


class ResolveGateIn(Schema):
    stepId: str = Field(min_length=1)
    gate: Gate
    decision: Decision
    note: str | None = None
    checkpoint: str | None = None
    edit: GateEditIn | None = Field(default=None, description="Only with decision 'edited'.")


class WriteArtifactIn(Schema):
    artifactKey: str = Field(min_length=1)
    typeId: str = Field(min_length=1)
    data: Any = None
    idempotencyKey: str | None = None
    stepId: str | None = None


class PatchArtifactIn(Schema):
    fromVersion: int = Field(ge=1)
    patch: list[dict[str, Any]]
    idempotencyKey: str | None = None
    stepId: str | None = None


class AnnotateIn(Schema):
    text: str = Field(min_length=1)
    tags: list[str] | None = None


class CancelIn(Schema):
    reason: str | None = None
    cascade: bool = Field(default=False, description="Also cancel every descendant run (forks, children).")


class WriteResult(Schema):
    runId: str
    revision: int
    status: RunStatus
    lastSeq: int
    seqs: list[int] = Field(description="The seqs of the events this request appended (may be empty).")
    created: bool = False


class CancelResult(WriteResult):
    cancelled: list[str]
    skipped: list[list[str]]


class EventItem(Schema):
    seq: int
    event: TraceEvent


class EventsPage(Schema):
    runId: str
    afterSeq: int
    lastSeq: int = Field(description="The run's latest seq.")
    nextAfterSeq: int = Field(description="Pass as after_seq to read on.")
    hasMore: bool
    events: list[EventItem]


class SignatureVerdict(Schema):
    status: Literal["signed", "unsigned", "invalid"] = Field(
        description="`signed`: a key of this instance signed this content; `unsigned`: integrity hash "
        "only; `invalid`: a signature is present and not accepted (see `code`)."
    )
    ok: bool
    code: str | None = None
    message: str | None = None
    kid: str | None = Field(
        None, description="RFC 7638 thumbprint of the signing key (see /.well-known/jwks.json)."
    )
    instance: str | None = None
    workspace: str | None = None
    exportedBy: str | None = None
    at: str | None = None
    redaction: str | None = None
    approvals: list[dict[str, Any]] = Field(
        default_factory=list,
        description="One per resolved gate: eventId, seq, stepId, gate, decision, `by` (the actor the "
        "exporting server stored beside the event), at.",
    )
    summary: str = Field(description="One line for people: signer, exporter, approvals.")


class VerifyResult(Schema):
    ok: bool
    code: str | None = None
    integrity: str | None = Field(
        None, description="The integrity hash's verdict: valid, mismatch, missing, unchecked."
    )
    message: str | None = None
    signature: SignatureVerdict | None = Field(
        None, description="The signature's verdict (absent when the bundle failed before it)."
    )
