"""The MCP server: tools and ``runs://`` resources over the official SDK (``mcp.server.MCPServer``).

Thin adapter: each tool reads its arguments, takes the caller's principal from the HTTP request
(authenticated once per request by :mod:`runs.mcp.asgi`), runs the matching function of
:mod:`runs.mcp.operations` in a worker thread and returns its structured result. A refusal
(no token, missing scope, unknown or foreign run, invalid input) is a tool error ``CODE: message``
with nothing changed.

``tools/list`` is public. Resources are listed and read per workspace: without a token the list
is empty, and a run of another workspace reads exactly like a missing one.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import importlib
import re
from typing import Annotated, Any, Literal
from urllib.parse import quote, unquote

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.server.request_state import RequestStateSecurity
from mcp_types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    EmbeddedResource,
    InputRequiredResult,
    ListResourcesResult,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)
from mcp_types import Resource as MCPResource
from pydantic import BaseModel, Field

from accounts.principals import Principal
from runs.mcp import operations as ops
from runs.mcp import tool_modules
from runs.mcp.versions import SERVER_DESCRIPTION, SERVER_NAME, SERVER_TITLE, server_version
from runs.web.wire import wire_json

PRINCIPAL_SCOPE_KEY = "workbench.principal"
RESOURCE_PREFIX = "runs://"
MODERN = "2026-07-28"
# request_decision holds the call open while nobody has decided: polls of the run, first after
# POLL_FIRST seconds, then less often (a decision taken in another process is seen within POLL_MAX).
POLL_FIRST = 0.2
POLL_MAX = 1.0


# --------------------------------------------------------------------------------------------
# The caller


def principal_of(ctx: Context) -> Principal | None:
    request = ctx.request_context.request
    scope = getattr(request, "scope", None) or {}
    return scope.get(PRINCIPAL_SCOPE_KEY)


def _state_principal(ctx: Any) -> str | None:
    """Binds sealed request state to the token that obtained it (another caller cannot replay it)."""
    request = getattr(ctx, "request", None)
    principal = (getattr(request, "scope", None) or {}).get(PRINCIPAL_SCOPE_KEY)
    return None if principal is None else f"{principal.workspace.pk}:{principal.actor}"


def _state_keys() -> list[bytes]:
    """Request-state keys shared by every process (derived from SECRET_KEY): stateless across processes."""
    return [hmac.new(settings.SECRET_KEY.encode(), b"workbench/mcp/request-state", hashlib.sha256).digest()]


async def _call(ctx: Context, fn, /, **kwargs) -> Any:
    principal = principal_of(ctx)
    try:
        return await sync_to_async(_in_thread, thread_sensitive=True)(fn, principal, kwargs)
    except ops.Refused as exc:
        raise ToolError(str(exc)) from None


_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")


def _snake(name: str) -> str:
    """A tool argument's name as the operations spell it (``fromStepId`` -> ``from_step_id``)."""
    return _CAMEL.sub(r"_\1", name).lower()


async def _forward(ctx: Context, fn, output: type[BaseModel], arguments: dict[str, Any]) -> CallToolResult:
    """Run operation ``fn`` with a tool's own arguments (its ``locals()``: camelCase names as
    the tool publishes them, renamed for the operation; ``ctx`` is the caller) and answer with
    ``output`` built from what it returns."""
    return _answer(output(**await _call(ctx, fn, **_operation_kwargs(arguments))))


def _operation_kwargs(arguments: dict[str, Any]) -> dict[str, Any]:
    return {_snake(name): value for name, value in arguments.items() if name != "ctx"}


def _answer(result: BaseModel) -> CallToolResult:
    """A tool's structured result and its text, the JSON written by :func:`runs.web.wire.wire_json`
    (numbers as JavaScript spells them, members in order). The transport re-spells the
    envelope the same way (:mod:`runs.mcp.asgi`)."""
    structured = result.model_dump(mode="json", by_alias=True)
    return CallToolResult(
        content=[TextContent(type="text", text=wire_json(structured).decode())],
        structured_content=structured,
    )


def _in_thread(fn, principal, kwargs):
    from django.db import close_old_connections

    close_old_connections()
    return fn(principal, **kwargs)


# --------------------------------------------------------------------------------------------
# Structured outputs


class RunSummary(BaseModel):
    id: str
    workflowId: str
    title: str
    status: str
    startedAt: str | None = None
    endedAt: str | None = None
    tags: list[str] | None = None
    revision: int
    lastSeq: int
    pendingGates: int


class RunList(BaseModel):
    runs: list[RunSummary]


class RunDetail(RunSummary):
    run: dict[str, Any] = Field(description="The protocol RunInstance.")
    stepStatus: dict[str, str]
    gates: list[dict[str, Any]] = Field(description="Gates a reviewer can decide now.")
    artifacts: dict[str, int] = Field(description="Artifact key -> number of versions.")
    totals: dict[str, Any]


class PromptVersionResult(BaseModel):
    name: str
    type: str = Field(description="text (body is a string) or chat (body is a list of {role, content}).")
    version: int
    labels: list[str]
    tags: list[str]
    body: Any = Field(description="The template; {{variable}} marks what is filled in.")
    config: dict[str, Any] = Field(description="The model and its parameters, versioned with the body.")
    variables: list[str]
    message: str
    created_by: str | None = None
    created_at: str


class WriteResult(BaseModel):
    runId: str
    revision: int
    status: str
    lastSeq: int
    seqs: list[int]
    created: bool = False


class ForkResult(WriteResult):
    parentRunId: str
    mode: str = Field(description="replay, branch or fork (the lightweight copy).")


SIGNATURE_DESCRIPTION = (
    "The signature's verdict against this instance's published keys: status signed (with kid, "
    "exportedBy, at, approvals and a one-line summary), unsigned (integrity hash only) or invalid "
    "(with its code); absent when the bundle failed before the signature was checked."
)


class IntegrityResult(BaseModel):
    runId: str
    ok: bool
    integrity: str = Field(description="The integrity hash's verdict (SHA-256 over canonical JSON).")
    sha256: str
    code: str | None = None
    message: str | None = None
    events: int
    bytes: int
    signature: dict[str, Any] | None = Field(None, description=SIGNATURE_DESCRIPTION)


class ValidationResult(BaseModel):
    ok: bool
    code: str | None = None
    integrity: str = Field(description="The integrity hash's verdict (SHA-256 over canonical JSON).")
    message: str | None = None
    sha256: str | None = None
    migrated: bool = False
    signature: dict[str, Any] | None = Field(None, description=SIGNATURE_DESCRIPTION)


class ExportedBundle(BaseModel):
    runId: str
    sha256: str = Field(description="The integrity hash (integrity.sha256).")
    uri: str = Field(description="The same bundle as a resource.")
    bundle: str = Field(
        description="The bundle, RFC 8785 canonical JSON with its integrity hash and this instance's "
        "Ed25519 signature (integrity.attestations, a DSSE envelope), exported for the calling token."
    )


class Decision(BaseModel):
    runId: str
    stepId: str
    gate: str
    checkpoint: str | None = None
    ticket: int = Field(description="Seq of the request event; pass it back to ask again.")
    status: Literal["pending", "decided", "closed"]
    decision: str | None = None
    note: str | None = None
    decidedBy: str | None = None
    decidedAtSeq: int | None = None


RunId = Annotated[str, Field(min_length=1, max_length=200, description="A run id of your workspace.")]
StepId = Annotated[str, Field(min_length=1, max_length=200, description="A step id of the run's workflow.")]
GateName = Literal["PAUSE_BEFORE", "PAUSE_AFTER", "CHECKPOINT"]
Redaction = Annotated[
    Literal["user", "mask", "drop"] | None,
    Field(
        description=(
            "Export a redacted user bundle instead. user: the reference runtime's profile (model payloads, "
            "tool arguments and results and run metadata go; titles, summaries, annotations, notes, error "
            "messages and artifact data stay). mask / drop: nothing a person wrote or a model said stays "
            "(masked as [REDACTED]; drop removes optional text); ids, steps, times, decisions, usage, cost "
            "and model names stay."
        )
    ),
]
# New run ids, checkpoint names, idempotency keys.
OptionalName = Annotated[str | None, Field(min_length=1, max_length=200)]

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
WRITES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)


# --------------------------------------------------------------------------------------------
# The server


class WorkbenchMCPServer(MCPServer):
    """MCPServer whose resource list depends on the caller (the runs of the token's workspace)."""

    async def _handle_list_resources(self, ctx, params) -> ListResourcesResult:
        request = ctx.request
        principal = (getattr(request, "scope", None) or {}).get(PRINCIPAL_SCOPE_KEY)
        if principal is None or not principal.has_scope("read"):
            return ListResourcesResult(resources=[])
        listed = await sync_to_async(_in_thread, thread_sensitive=True)(
            ops.list_runs, principal, {"limit": 500}
        )
        return ListResourcesResult(
            resources=[
                MCPResource(
                    uri=resource_uri(run["id"]),
                    name=run["id"],
                    title=f"{run['title']} ({run['status']})",
                    description=f"Signed bundle of run {run['id']} (workflow {run['workflowId']}): "
                    "integrity hash and this instance's Ed25519 signature.",
                    mime_type="application/json",
                )
                for run in listed["runs"]
            ]
        )


def resource_uri(run_id: str, redact: str | None = None) -> str:
    uri = RESOURCE_PREFIX + quote(run_id, safe="")
    return f"{uri}?redact={redact}" if redact else uri


# Scope each tool needs (for the discovery files; the check itself is in runs.mcp.operations).
TOOL_SCOPES: dict[str, str] = {
    "list_runs": "read",
    "get_run": "read",
    "verify_run_integrity": "read",
    "validate_run_bundle": "read",
    "start_run": "write",
    "resolve_gate": "review",
    "write_artifact": "write or review",
    "export_bundle": "read",
    "request_decision": "write",
    "review_gate": "review",
    "fork_run": "write",
    "get_prompt": "read",
}


def build_server() -> WorkbenchMCPServer:
    mcp = WorkbenchMCPServer(
        name=SERVER_NAME,
        title=SERVER_TITLE,
        description=SERVER_DESCRIPTION,
        version=server_version(),
        instructions=(
            "Workbench records runs of LLM workflows. Authenticate with a workspace token "
            "(Authorization: Bearer wbt_...). Read with list_runs/get_run, verify with "
            "verify_run_integrity, export bundles (integrity hash plus this instance's Ed25519 signature, "
            "keys at /.well-known/jwks.json) with export_bundle or the runs:// resources; "
            "write with start_run, write_artifact, resolve_gate. Ask a human with request_decision."
        ),
        log_level="WARNING",
        request_state_security=RequestStateSecurity(keys=_state_keys(), bind_principal=_state_principal),
        subscriptions=False,
    )

    @mcp.tool(title="List runs", annotations=READ_ONLY)
    async def list_runs(
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=ops.MAX_LIST, description="How many, newest first.")] = 100,
        status: Literal["running", "completed", "failed", "cancelled"] | None = None,
    ) -> Annotated[CallToolResult, RunList]:
        """List the runs of your workspace, newest first."""
        return await _forward(ctx, ops.list_runs, RunList, locals())

    @mcp.tool(title="Get a run", annotations=READ_ONLY)
    async def get_run(ctx: Context, runId: RunId) -> Annotated[CallToolResult, RunDetail]:
        """A run's document, status, step status, open gates, artifacts and totals."""
        return await _forward(ctx, ops.get_run_detail, RunDetail, locals())

    @mcp.tool(title="Verify a run's integrity", annotations=READ_ONLY)
    async def verify_run_integrity(ctx: Context, runId: RunId) -> Annotated[CallToolResult, IntegrityResult]:
        """Export the run as a signed bundle and verify its integrity hash (canonical JSON + SHA-256) as any
        verifier would, then its Ed25519 signature against this instance's published keys."""
        return await _forward(ctx, ops.verify_run_integrity, IntegrityResult, locals())

    @mcp.tool(title="Validate a run bundle", annotations=READ_ONLY)
    async def validate_run_bundle(
        ctx: Context,
        bundle: Annotated[
            dict[str, Any] | str,
            Field(description="A RunBundle: its JSON text exactly as received (hashed as is), or an object."),
        ],
    ) -> Annotated[CallToolResult, ValidationResult]:
        """Check a bundle (schema, structure, integrity hash, then its signature against this instance's
        keys) without storing it; failures carry an error code."""
        return await _forward(ctx, ops.validate_run_bundle, ValidationResult, locals())

    @mcp.tool(title="Get a prompt version", annotations=READ_ONLY)
    async def get_prompt(
        ctx: Context,
        name: Annotated[str, Field(max_length=200, description="The prompt's name ('/' separates folders).")],
        label: Annotated[
            str | None, Field(max_length=40, description="production when neither is given.")
        ] = None,
        version: Annotated[int | None, Field(ge=1, lt=2**31)] = None,
    ) -> Annotated[CallToolResult, PromptVersionResult]:
        """A prompt version by label (production, staging, latest ...) or by number: what pipelines run."""
        return await _forward(ctx, ops.get_prompt, PromptVersionResult, locals())

    @mcp.tool(title="Start a run", annotations=WRITES)
    async def start_run(
        ctx: Context,
        workflow: Annotated[
            dict[str, Any], Field(description="A WorkflowSpec: {id, version, steps, edges}.")
        ],
        runId: OptionalName = None,
        subject: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
        tags: list[str] | None = None,
    ) -> Annotated[CallToolResult, WriteResult]:
        """Start a run of a workflow in your workspace (needs the write scope)."""
        return await _forward(ctx, ops.start_run, WriteResult, locals())

    @mcp.tool(title="Resolve a gate", annotations=WRITES)
    async def resolve_gate(
        ctx: Context,
        runId: RunId,
        stepId: StepId,
        gate: GateName,
        decision: Literal["approved", "rejected"],
        note: Annotated[str | None, Field(max_length=10_000)] = None,
        checkpoint: OptionalName = None,
    ) -> Annotated[CallToolResult, WriteResult]:
        """Approve or reject a gate of a run (needs the review scope)."""
        return await _forward(ctx, ops.resolve_gate, WriteResult, locals())

    @mcp.tool(title="Write an artifact", annotations=WRITES)
    async def write_artifact(
        ctx: Context,
        runId: RunId,
        artifactKey: Annotated[str, Field(min_length=1, max_length=300)],
        typeId: Annotated[
            str, Field(min_length=1, max_length=200, description="Schema id of the artifact type.")
        ],
        data: Annotated[Any, Field(description="The artifact's JSON value (validated against its schema).")],
        stepId: StepId | None = None,
        idempotencyKey: OptionalName = None,
    ) -> Annotated[CallToolResult, WriteResult]:
        """Write a new version of an artifact (needs the write or review scope)."""
        return await _forward(ctx, ops.write_artifact, WriteResult, locals())

    @mcp.tool(title="Export a signed bundle", annotations=READ_ONLY)
    async def export_bundle(
        ctx: Context, runId: RunId, redact: Redaction = None
    ) -> Annotated[CallToolResult, ExportedBundle]:
        """The run as a RunBundle: canonical JSON with engine snapshot, integrity hash (integrity.sha256) and
        this instance's Ed25519 signature (integrity.attestations) naming your token as the exporter."""
        data, bundle = await _call(ctx, ops.export_bundle, run_id=runId, redact=redact)
        answer = _answer(
            ExportedBundle(
                runId=runId,
                sha256=bundle["integrity"]["sha256"],
                uri=resource_uri(runId, redact),
                bundle=data.decode(),
            )
        )
        # The bytes themselves as an embedded resource (hosts that show or save resources get the
        # file with its URI and media type; the text is the canonical JSON, hashed as is).
        answer.content.append(
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(
                    uri=resource_uri(runId, redact), mime_type="application/json", text=data.decode()
                ),
            )
        )
        return answer

    @mcp.tool(title="Fork a run", annotations=WRITES)
    async def fork_run(
        ctx: Context,
        runId: RunId,
        mode: Annotated[
            Literal["replay", "branch"] | None,
            Field(
                description="replay: deterministic re-run from the cached model answers; branch: with overlay."
            ),
        ] = None,
        fromSeq: Annotated[
            int | None, Field(ge=0, description="Fork the run as it was after this seq.")
        ] = None,
        fromStepId: StepId | None = None,
        overlay: Annotated[
            dict[str, Any] | None,
            Field(description="A branch's run options overlay (tags, configurable, gateDecisions)."),
        ] = None,
        newRunId: OptionalName = None,
    ) -> Annotated[CallToolResult, ForkResult]:
        """Fork a run: replay it, branch it with an overlay, or copy its latest state (needs write)."""
        return await _forward(ctx, ops.fork_run, ForkResult, locals())

    @mcp.tool(
        title="Ask a human for a decision",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    )
    async def request_decision(
        ctx: Context,
        runId: RunId,
        stepId: StepId,
        gate: GateName = "CHECKPOINT",
        checkpoint: OptionalName = None,
        reason: Annotated[
            str | None, Field(max_length=10_000, description="What the reviewer should decide.")
        ] = None,
        ticket: Annotated[
            int | None, Field(ge=1, description="From an earlier answer: ask about that request.")
        ] = None,
        waitSeconds: Annotated[
            int | None,
            Field(
                ge=0,
                le=ops.MAX_DECISION_WAIT,
                description="How long this call waits for the decision before answering pending "
                "(default: the server's WORKBENCH_MCP_DECISION_WAIT_SECONDS; 0 answers at once).",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, Decision] | InputRequiredResult:
        """Request a reviewer's decision at a gate and wait for it; a reviewer decides in the browser.

        The call is held open until the reviewer decides (or the wait runs out: ``waitSeconds``).
        Then clients of protocol 2026-07-28 get "input required" with a sealed request state and
        their SDK asks again, which waits again; older clients get status "pending" and a
        ticket to pass back in the next call.
        """
        if ticket is None and ctx.request_state:
            ticket = _ticket_from_state(ctx.request_state)
        arguments = _operation_kwargs(locals())
        wait = arguments.pop("wait_seconds")
        result = await _call(ctx, ops.request_decision, **arguments)
        result = await _held_until_decided(ctx, arguments, result, ops.decision_wait(wait))
        if result["status"] == "pending" and ctx.protocol_version == MODERN:
            return InputRequiredResult(request_state=wire_json({"ticket": result["ticket"]}).decode())
        return _answer(Decision(**result))

    @mcp.resource(
        "runs://{runId}{?redact}",
        name="run-bundle",
        title="Run bundle",
        description=(
            "A run of your workspace as a protocol 1.0.0 bundle (canonical JSON) with its integrity hash "
            "and this instance's Ed25519 signature; ?redact=user|mask|drop for its redacted user bundle."
        ),
        mime_type="application/json",
    )
    async def run_bundle(runId: str, ctx: Context, redact: str | None = None) -> str:
        try:
            data, _bundle = await _call(ctx, ops.export_bundle, run_id=unquote(runId), redact=redact)
        except ToolError as exc:
            raise ResourceNotFoundError(str(exc)) from None
        return data.decode()

    @mcp.tool(title="Review a waiting gate", annotations=WRITES)
    async def review_gate(
        ctx: Context,
        runId: RunId,
        stepId: StepId,
        gate: GateName,
        checkpoint: OptionalName = None,
    ) -> Annotated[CallToolResult, GateReview] | InputRequiredResult:
        """Decide a waiting gate as yourself: the server asks you (an elicitation form: approve or
        reject, and a note) and records your answer under your identity (needs the review scope).

        Protocol 2026-07-28: an "input required" round carrying the elicitation (stateless; the
        SDK shows the form through its elicitation callback and calls again with the answer).
        2025-11-25: an ``elicitation/create`` request during the call; this endpoint is stateless
        (JSON responses), so such a session has no back channel and gets ELICITATION_UNAVAILABLE.
        """
        where = {"run_id": runId, "step_id": stepId, "gate": gate, "checkpoint": checkpoint}
        asked = await _call(ctx, ops.gate_to_review, **where)
        if ctx.protocol_version == MODERN:
            response = (ctx.input_responses or {}).get(REVIEW_KEY)
            if not isinstance(response, ElicitResult) or _gate_of_state(ctx.request_state) != asked_key(
                asked
            ):
                return InputRequiredResult(
                    input_requests={
                        REVIEW_KEY: ElicitRequest(
                            params=ElicitRequestFormParams(
                                message=review_message(asked), requested_schema=REVIEW_SCHEMA
                            )
                        )
                    },
                    request_state=wire_json({"gate": asked_key(asked)}).decode(),
                )
            action, content = response.action, response.content or {}
        else:
            try:
                elicited = await ctx.elicit(review_message(asked), GateAnswer)
            except Exception as exc:  # the client offers no elicitation (or no stream to ask on)
                raise ToolError(
                    f"ELICITATION_UNAVAILABLE: this client cannot be asked ({type(exc).__name__}); "
                    "use protocol 2026-07-28, or resolve_gate with the decision as arguments"
                ) from None
            action = elicited.action
            content = elicited.data.model_dump() if elicited.action == "accept" else {}
        decision = content.get("decision")
        if action != "accept" or decision not in ("approved", "rejected"):
            return _answer(GateReview(status="not decided", **_review_ids(asked)))
        note = content.get("note")
        result = await _call(
            ctx,
            ops.resolve_gate,
            **where,
            decision=decision,
            note=note.strip()[:4000] or None if isinstance(note, str) else None,
            channel="mcp",
        )
        return _answer(
            GateReview(status="decided", decision=decision, seqs=result["seqs"], **_review_ids(asked))
        )

    for name in tool_modules():  # tools of apps on top of runs (runs.mcp.register_tool_module)
        TOOL_SCOPES.update(importlib.import_module(name).add_tools(mcp, _forward))
    return mcp


REVIEW_KEY = "review"
REVIEW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "title": "Decision",
            "enum": ["approved", "rejected"],
            "enumNames": ["Approve", "Reject"],
        },
        "note": {"type": "string", "title": "Note (optional, kept with the decision)", "maxLength": 4000},
    },
    "required": ["decision"],
}


class GateAnswer(BaseModel):
    """The elicitation form of review_gate (2025-11-25 clients)."""

    decision: Literal["approved", "rejected"] = Field(title="Decision")
    note: str = Field(default="", max_length=4000, title="Note (optional, kept with the decision)")


class GateReview(BaseModel):
    status: Literal["decided", "not decided"]
    runId: str
    stepId: str
    gate: str
    checkpoint: str | None = None
    decision: str | None = None
    seqs: list[int] = Field(default_factory=list)


def asked_key(asked: dict) -> list:
    return [asked["runId"], asked["stepId"], asked["gate"], asked["checkpoint"]]


def _review_ids(asked: dict) -> dict:
    return {k: asked[k] for k in ("runId", "stepId", "gate", "checkpoint")}


def _gate_of_state(state: str | None) -> list | None:
    """The gate a sealed review_gate request state names (the answer belongs to that gate only)."""
    if not state:
        return None
    try:
        value = orjson.loads(state).get("gate")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return value if isinstance(value, list) else None


def review_message(asked: dict) -> str:
    where = f"checkpoint “{asked['checkpoint']}”" if asked.get("checkpoint") else asked["gate"]
    text = f"Decide {where} of step “{asked['stepTitle']}” in run “{asked['title']}”."
    if asked.get("reason"):
        text += f" Why it waits: {asked['reason']}"
    return text


async def _held_until_decided(ctx: Context, arguments: dict, result: dict, wait: float) -> dict:
    """Ask again (with the ticket) until the gate is decided or closed, for at most ``wait`` seconds.

    A long poll: the SDK's stock loop retries an "input required" answer ten times within about
    2.4 s, so an answer that comes back at once would exhaust it long before a person decides.
    Each ask is one short read in a worker thread; the wait between them is on the event loop.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    delay = POLL_FIRST
    arguments = {**arguments, "ticket": result["ticket"], "reason": None}
    while result["status"] == "pending":
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        await asyncio.sleep(min(delay, remaining))
        delay = min(delay * 1.5, POLL_MAX)
        result = await _call(ctx, ops.request_decision, **arguments)
    return result


def _ticket_from_state(state: str) -> int | None:
    try:
        value = orjson.loads(state).get("ticket")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return value if isinstance(value, int) and value >= 1 else None


@functools.cache
def get_server() -> WorkbenchMCPServer:
    return build_server()


def tool_catalog() -> list[dict[str, str]]:
    """Name, scope and first line of the description of each registered tool (for discovery)."""
    tools = get_server()._tool_manager.list_tools()
    return [
        {
            "name": tool.name,
            "scope": TOOL_SCOPES.get(tool.name, "read"),
            "description": (tool.description or "").strip().splitlines()[0],
        }
        for tool in tools
    ]
