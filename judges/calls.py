"""Asking a judge: an LLM judge is a short run of the built-in ``gate-judge`` workflow (one step,
``judge``; tags ``gate-judge`` and the judge's actor), so its model call goes through the provider
layer and the response cache and lands on the ledger under its own step and tag; a code rule
(``review.rules``) answers without any call.

    verdict = ask(judge, run, gate)   # Verdict(decision, confidence, rationale, cost, run_id, ms)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from evals.judge import provider_settings
from judges import stats
from judges.models import GateJudge, JudgeKind
from review.rules import RunFacts, matches, parse_rules
from runs.actions import ActionError
from runs.actions.budgets import BUDGET_EXCEEDED
from runs.engine.state import TERMINAL_STATUSES, RunState, gate_payload_key
from runs.execution.host import Workbench
from runs.execution.replay import run_program
from runs.models import Run
from runs.protocol.canonical import canonical_str
from runs.selectors.runs import JUDGE_CALL_TAG

WORKFLOW: dict[str, Any] = {
    "id": "gate-judge",
    "version": 1,
    "steps": [{"id": "judge", "inputs": [], "outputs": ["verdict"]}],
    "edges": [],
}
TAG = JUDGE_CALL_TAG  # the judge's calls: readable only by those who may manage judges
MAX_TOKENS = 400


@dataclass
class Verdict:
    decision: str  # approved | rejected
    confidence: float
    rationale: str
    cost: Decimal = Decimal(0)
    run_id: str = ""
    latency_ms: float = 0.0


class JudgeFailed(Exception):
    pass


class JudgeOverBudget(JudgeFailed):
    """The workspace is past its monthly cap: the provider was not asked (BUDGET_EXCEEDED)."""


def gate_values(run: Run, state: RunState, gate: dict[str, Any]) -> dict[str, Any]:
    """What a judge's prompt may name: ``{{step}}``, ``{{gate}}``, ``{{checkpoint}}``,
    ``{{reason}}``, ``{{payload}}`` (the gate's payload artifact as JSON), ``{{title}}``, ``{{run}}``."""
    artifact = state.artifacts.get(gate_payload_key(gate["stepId"], gate["gate"], gate.get("checkpoint")))
    payload = artifact.get("data") if isinstance(artifact, dict) else None
    return {
        "step": gate["stepId"],
        "gate": gate["gate"],
        "checkpoint": gate.get("checkpoint") or "",
        "reason": gate.get("reason") or "",
        "payload": canonical_str(payload) if payload is not None else "",
        "title": run.title or "",
        "run": run.run_id,
    }


class JudgeProgram:
    """The step code of one judgement: fetch the prompt version, ask the model, write the verdict."""

    def __init__(self, judge: GateJudge, values: dict[str, Any]) -> None:
        self.judge = judge
        self.values = values
        self.answer = ""

    def __call__(self, s: Any) -> None:
        config = self.judge.config
        prompt = s.prompt(config["prompt"], version=int(config["promptVersion"]))
        if prompt is None:
            s.fail(f"prompt {config['prompt']!r} version {config['promptVersion']} is gone")
            raise JudgeFailed("the judge's prompt version is gone")
        body = prompt.compile(**self.values)
        messages = body if isinstance(body, list) else [{"role": "user", "content": str(body)}]
        request = {"model": config["model"], "max_tokens": MAX_TOKENS, "messages": messages}
        s.begin_step("judge")
        try:
            result = s.model_call(
                provider_settings(config["provider"]),
                request,
                step_id="judge",
                correlation_id="judge",
                summary=f"gate judge {self.judge.label}",
                use_cache=True,
                prompt=prompt,
            )
        except ActionError as exc:
            s.fail(f"the judge's model call was refused: {exc.code}: {exc.message[:300]}")
            failure = JudgeOverBudget if exc.code == BUDGET_EXCEEDED else JudgeFailed
            raise failure(f"{exc.code}: {exc.message[:400]}") from exc
        except Exception as exc:  # the judgement run ends failed; the gate is left to people
            s.fail(f"the judge's model call failed: {type(exc).__name__}: {str(exc)[:300]}")
            raise JudgeFailed(f"{type(exc).__name__}: {str(exc)[:300]}") from exc
        self.answer = result.text or ""
        s.write_artifact("verdict", "judges.verdict", {"answer": self.answer}, step_id="judge")
        s.complete_step("judge")
        s.complete()


def _usd(cost_totals: dict[str, Any] | None) -> Decimal:
    try:
        return Decimal(str((cost_totals or {}).get("USD", "0")))
    except InvalidOperation:
        return Decimal(0)


def ask_llm(judge: GateJudge, run: Run, state: RunState, gate: dict[str, Any]) -> Verdict:
    program = JudgeProgram(judge, gate_values(run, state, gate))
    started = time.perf_counter()
    session = run_program(
        Workbench(workspace=run.workspace, actor=judge.actor),
        workflow=WORKFLOW,
        program=program,
        metadata={"judge": judge.label, "judgeId": judge.judge_id, "gateRun": run.run_id},
        tags=[TAG, judge.actor],
    )
    latency = (time.perf_counter() - started) * 1000
    judged = session.run
    try:
        decision, confidence, rationale = stats.parse_verdict(program.answer)
    except ValueError as exc:
        raise JudgeFailed(str(exc)) from exc
    return Verdict(decision, confidence, rationale, _usd(judged.cost_totals), judged.run_id, latency)


def ask_rule(judge: GateJudge, run: Run) -> Verdict:
    started = time.perf_counter()
    rules = parse_rules(judge.config.get("rules"))
    on_match = judge.config.get("onMatch", "rejected")
    facts = RunFacts(
        run_id=run.run_id,
        workflow_id=run.workflow_id,
        status=run.status,
        finished=run.status in TERMINAL_STATUSES,
        rejected_gates=run.rejected_gates,
        had_error=run.error_count > 0,
        cost=dict(run.cost_totals or {}),
    )
    hit = matches(rules, facts)
    other = "approved" if on_match == "rejected" else "rejected"
    why = "the rule matched" if hit else "no rule matched"
    latency = (time.perf_counter() - started) * 1000
    return Verdict(on_match if hit else other, 1.0, f"{why}: {canonical_str(rules)}", latency_ms=latency)


def ask(judge: GateJudge, run: Run, state: RunState, gate: dict[str, Any]) -> Verdict:
    if judge.kind == JudgeKind.RULE:
        return ask_rule(judge, run)
    return ask_llm(judge, run, state, gate)
