"""How a playground execution is recorded as a run, all through runs.actions: ``step_started``;
``model_io`` request (the exact wire body, secrets redacted); ``model_io`` stream_chunk events
sharing the request's correlation id; ``model_io`` response with usage (cachedInputTokens,
reasoningTokens; left out when the provider did not report it) and cost; ``tool_call`` per tool
the model called; the checked answer as a ``playground.<operation>`` artifact; ``step_completed``
and the run's end. A cut stream logs what arrived (marked ``incomplete``) and fails the run with
``STREAM_CUT``; an answer that arrived after Stop is logged, billed, before the run is cancelled.
"""

from __future__ import annotations

from typing import Any

from playground import operations
from playground.models import Execution
from runs.actions import do_commands, do_start_run
from runs.engine import commands as cmd
from runs.providers import pricing
from runs.providers.base import ProviderResult
from runs.providers.redact import redact
from runs.selectors.prices import price_book
from runs.selectors.prompts import PROMPT_KEY

WORKFLOW: dict[str, Any] = {
    "id": "playground",
    "version": 1,
    "title": "Playground",
    "steps": [{"id": "call", "title": "Model call", "gatePolicy": "AUTO"}],
    "edges": [],
}
STEP = "call"
CANCELLED = "CANCELLED"


class RunRecorder:
    """Writes one execution's run through runs.actions."""

    def __init__(self, execution: Execution) -> None:
        self.execution = execution
        self.workspace = execution.workspace
        self.actor = f"user:{execution.user.get_username()}" if execution.user else "playground"
        self.run_id = execution.run_id

    def _do(self, *commands: Any) -> None:
        do_commands(workspace=self.workspace, run_id=self.run_id, commands=list(commands), actor=self.actor)

    def start(self, wire_request: dict, secrets: tuple[str, ...]) -> str:
        ex = self.execution
        run = do_start_run(
            workspace=self.workspace,
            workflow={**WORKFLOW, "title": run_title(ex.user_content_json)},
            actor=self.actor,
            context={"parentRunId": ex.parent_run_id} if ex.parent_run_id else None,
            metadata={
                "playground": {
                    "executionId": str(ex.pk),
                    "provider": ex.provider_kind,
                    "model": ex.model_name,
                    "operationType": ex.operation_type,
                    "flags": ex.flags,
                    "notes": ex.notes,
                    "compareGroup": ex.compare_group or None,
                    "label": ex.label or None,
                    "conversationId": ex.conversation_id or None,
                }
            },
            tags=["playground", ex.operation_type]
            + ([f"conversation:{ex.conversation_id}"] if ex.conversation_id else []),
        )
        self.run_id = run.run_id
        self._do(
            cmd.BeginStep(STEP),
            cmd.LogModelIO(
                direction="request",
                provider=ex.provider_kind,
                model=ex.model_name,
                summary=prompt_summary(ex.user_content_json),
                payload=redact(wire_request, secrets),
                step_id=STEP,
                correlation_id=ex.correlation_id,
            ),
        )
        return run.run_id

    def chunks(self, pieces: list[dict]) -> None:
        ex = self.execution
        self._do(
            *(
                cmd.LogModelIO(
                    direction="stream_chunk",
                    provider=ex.provider_kind,
                    model=ex.model_name,
                    payload=piece,
                    step_id=STEP,
                    correlation_id=ex.correlation_id,
                )
                for piece in pieces
            )
        )

    def complete(
        self,
        result: ProviderResult,
        outcome: operations.Outcome,
        priced: pricing.PricedCall | None,
        duration_ms: int,
    ) -> None:
        ex = self.execution
        commands: list[Any] = [
            cmd.LogModelIO(
                direction="response",
                provider=ex.provider_kind,
                model=result.model or ex.model_name,
                usage=result.usage.to_protocol() if result.usage is not None else None,
                cost=priced.protocol_cost() if priced is not None else None,
                duration_ms=duration_ms,
                summary=(result.text or "")[:200] or None,
                payload=_with_prompt(_with_pricing_note(ex, result, priced), ex.flags),
                step_id=STEP,
                correlation_id=ex.correlation_id,
            )
        ]
        commands += completion_commands(
            result,
            outcome,
            operation_type=ex.operation_type,
            output_tool=ex.output_tool,
            correlation_id=ex.correlation_id,
        )
        self._do(*commands)

    def fail(self, code: str, message: str, partial: ProviderResult | None = None) -> None:
        """The run fails with ``code``; a cut answer's partial response is logged first."""
        commands: list[Any] = []
        if partial is not None:
            ex = self.execution
            commands.append(
                cmd.LogModelIO(
                    direction="response",
                    provider=ex.provider_kind,
                    model=partial.model or ex.model_name,
                    summary=(partial.text or "")[:200] or None,
                    payload={"incomplete": True, **(partial.raw or {"text": partial.text})},
                    step_id=STEP,
                    correlation_id=ex.correlation_id,
                )
            )
        self._do(*commands, *failure_commands(code, message))

    def late_answer(
        self, result: ProviderResult, priced: pricing.PricedCall | None, duration_ms: int, message: str
    ) -> None:
        """An answer that arrived after Stop: its response (usage and cost: it is billed), then
        the run's cancellation."""
        ex = self.execution
        self._do(
            cmd.LogModelIO(
                direction="response",
                provider=ex.provider_kind,
                model=result.model or ex.model_name,
                usage=result.usage.to_protocol() if result.usage is not None else None,
                cost=priced.protocol_cost() if priced is not None else None,
                duration_ms=duration_ms,
                summary=(result.text or "")[:200] or None,
                payload=_with_prompt(_with_pricing_note(ex, result, priced), ex.flags),
                step_id=STEP,
                correlation_id=ex.correlation_id,
            ),
            cmd.RecordError(message=message, code=CANCELLED, step_id=STEP),
            cmd.CompleteStep(STEP, ok=False, error={"message": message, "code": CANCELLED}),
            cmd.CancelRun(reason=message),
        )


def completion_commands(
    result: ProviderResult,
    outcome: operations.Outcome,
    *,
    operation_type: str,
    output_tool: str,
    correlation_id: str,
) -> list[Any]:
    """What a playground run records after the model's answer: a ``tool_call`` per tool the
    model called (not the output tool), then the checked answer as the ``answer`` artifact and
    the run's end, or the structured-output failure."""
    commands: list[Any] = [
        cmd.LogToolCall(name=call["name"], args=call["input"], step_id=STEP, correlation_id=correlation_id)
        for call in result.tool_calls
        if call["name"] != output_tool
    ]
    if outcome.ok:
        commands.append(
            cmd.WriteArtifact(
                key="answer", type_id=operations.get(operation_type).type_id, data=outcome.value, step_id=STEP
            )
        )
        return commands + [cmd.CompleteStep(STEP, ok=True), cmd.CompleteRun()]
    return commands + failure_commands(
        "STRUCTURED_OUTPUT_INVALID", f"structured output invalid: {outcome.error}"
    )


def failure_commands(code: str, message: str) -> list[Any]:
    return [
        cmd.RecordError(message=message, code=code, step_id=STEP),
        cmd.CompleteStep(STEP, ok=False, error={"message": message, "code": code}),
        cmd.FailRun(reason=message, code=code),
    ]


TITLE_CHARS = 80


def run_title(user_content: Any) -> str:
    """A playground run is titled by its prompt (first line, shortened), so runs can be told apart."""
    text = " ".join((prompt_summary(user_content) or "").split())
    if not text:
        return "Playground"
    if len(text) > TITLE_CHARS:
        text = text[: TITLE_CHARS - 1].rstrip() + "…"
    return f"Playground · {text}"


def prompt_summary(user_content: Any) -> str | None:
    if isinstance(user_content, str):
        return user_content[:200] or None
    if isinstance(user_content, list):
        texts = [b.get("text", "") for b in user_content if isinstance(b, dict) and b.get("type") == "text"]
        return " ".join(texts)[:200] or None
    return None


def _with_prompt(payload: Any, flags: Any) -> Any:
    """The response payload with the opened prompt version it was sent with (``workbench.prompt``,
    as the SDK records it: the runs list filters by it, the prompt page sums cost by it)."""
    ref = flags.get("prompt") if isinstance(flags, dict) else None
    if not isinstance(ref, dict):
        return payload
    return {**(payload if isinstance(payload, dict) else {}), PROMPT_KEY: ref}


def _with_pricing_note(ex: Execution, result: ProviderResult, priced: pricing.PricedCall | None) -> Any:
    """Which source priced the call (the protocol's cost object takes no extra keys); a call with
    usage that no price covers says why ("no cache-read price for ..."), as every way in does. A
    call without usage is left as it is (unknown, nothing priced)."""
    payload = result.raw
    if not isinstance(payload, dict):
        return payload
    if priced is not None:
        return {**payload, pricing.PRICING_KEY: priced.note()}
    if result.usage is None:
        return payload
    book = price_book(ex.workspace)
    event = {
        "provider": ex.provider_kind,
        "model": result.model or ex.model_name,
        "usage": result.usage.to_protocol(),
        "payload": {
            "cacheCreationInputTokens": result.usage.cache_write_tokens,
            "cacheCreation1hInputTokens": result.usage.cache_write_1h_tokens,
        },
    }
    why = pricing.unpriced_reason(event, book.own, book.catalogue)
    return {**payload, pricing.PRICING_KEY: {"source": "unpriced", "why": why}}
