"""The LLM judge: an evaluator whose model call is a run's recorded ``model_io``.

Each judgement is a short run of the built-in ``evals-judge`` workflow (one step, ``judge``),
executed through the ordinary step-code path (``runs.execution``): the model call goes through
``runs.execution.model_calls`` with the workspace's response cache, so judging the same output
again with the same judge (model, prompt, version) is answered from the cache: no provider
request, and the judgement is still recorded (who, what was asked, what it answered, its cost).

Which provider endpoint a judge calls: ``settings.WORKBENCH_JUDGE_PROVIDERS`` (``{kind:
{"base_url", "api_key", "max_retries"}}``), else the provider's own endpoint with the key from
its SDK's usual environment variable.
"""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings

from evals import scoring
from runs.execution.host import Workbench
from runs.execution.replay import run_program
from runs.models import Workspace
from runs.protocol.canonical import canonical_str
from runs.providers import egress
from runs.providers.base import ProviderSettings

WORKFLOW: dict[str, Any] = {
    "id": "evals-judge",
    "version": 1,
    "steps": [{"id": "judge", "inputs": [], "outputs": ["verdict"]}],
    "edges": [],
}
KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
MAX_TOKENS = 64


def provider_settings(kind: str) -> ProviderSettings:
    configured = (getattr(settings, "WORKBENCH_JUDGE_PROVIDERS", None) or {}).get(kind) or {}
    return ProviderSettings(
        kind=kind,
        api_key=configured.get("api_key") or os.environ.get(KEY_ENV.get(kind, ""), None),
        base_url=configured.get("base_url"),
        max_retries=int(configured.get("max_retries", 2)),
        egress_allow=egress.settings_allowance(settings, operator=True),
    )


def prompt_text(spec: dict[str, Any], output: Any, expected: Any, item: dict[str, Any]) -> str:
    """The judge's prompt with ``{input}``, ``{output}`` and ``{expected}`` replaced by their JSON
    (plain replacement: braces elsewhere in the prompt stay as written)."""
    text = spec["prompt"]
    for name, value in (("input", item.get("input")), ("output", output), ("expected", expected)):
        text = text.replace("{" + name + "}", canonical_str(value))
    return text


class JudgeProgram:
    """The step code of one judgement: ask the model, write its verdict."""

    def __init__(self, spec: dict[str, Any], prompt: str) -> None:
        self.spec = spec
        self.prompt = prompt
        self.answer = ""

    def __call__(self, s: Any) -> None:
        request = {
            "model": self.spec["model"],
            "max_tokens": MAX_TOKENS,
            "messages": [{"role": "user", "content": self.prompt}],
        }
        s.begin_step("judge")
        try:
            result = s.model_call(
                provider_settings(self.spec["provider"]),
                request,
                step_id="judge",
                correlation_id="judge",
                summary=f"judge {self.spec['model']}@{self.spec['version']}",
                use_cache=True,
            )
        except Exception as exc:  # the judgement run ends failed; the item is left unscored
            s.fail(f"the judge's model call failed: {type(exc).__name__}: {str(exc)[:300]}")
            raise
        self.answer = result.text or ""
        s.write_artifact("verdict", "evals.verdict", {"answer": self.answer}, step_id="judge")
        s.complete_step("judge")
        s.complete()


def judge_for(workspace: Workspace, *, actor: str = "evals:judge") -> scoring.JudgeFn:
    """The ``judge`` callable :func:`evals.scoring.evaluate` uses for this workspace."""

    def judge(spec: dict[str, Any], output: Any, expected: Any, item: dict[str, Any]) -> float:
        program = JudgeProgram(spec, prompt_text(spec, output, expected, item))
        run_program(
            Workbench(workspace=workspace, actor=actor),
            workflow=WORKFLOW,
            program=program,
            metadata={"judge": scoring.evaluator_label(spec), "itemId": item.get("id")},
            tags=["evals-judge"],
        )
        return scoring.judge_verdict(program.answer)

    return judge
