"""A small two-step pipeline whose model calls go through the real Anthropic SDK to the loopback
fake (which counts requests): classify, then draft a reply (reviewed after it: PAUSE_AFTER).
``configurable.draftModel`` picks the draft's model; the reply names it, so a changed model is a
changed output (the planted regression of the CI gate tests). The draft's text is prompt
``support/draft`` (its ``production`` version) when the workspace has one."""

from __future__ import annotations

from decimal import Decimal

from runs.providers.base import ProviderSettings
from runs.providers.pricing import Price

WORKFLOW = {
    "id": "support-reply",
    "version": 1,
    "steps": [
        {"id": "classify", "inputs": ["ticket"], "outputs": ["category"]},
        {"id": "draft", "inputs": ["category"], "outputs": ["reply"], "gatePolicy": "PAUSE_AFTER"},
    ],
    "edges": [{"id": "e1", "from": "classify", "to": "draft"}],
}

PRICES = {
    "claude-haiku-4-5": Price(input=Decimal("1"), output=Decimal("5")),
    "claude-sonnet-4-5": Price(input=Decimal("3"), output=Decimal("15")),
}


class SupportPipeline:
    configurable_steps = {
        "draftModel": "draft",
        "extraReview": "draft",
    }  # what evals.runner forks from for a change
    step_order = ["classify", "draft"]
    prompt_steps = {"support/draft": "draft"}  # an experiment that changes this prompt forks from draft

    def __init__(self, url: str) -> None:
        self.provider = ProviderSettings(
            kind="anthropic",
            api_key="test-anthropic-key",
            base_url=url,
            max_retries=0,
            egress_allow=("127.0.0.0/8",),
        )

    def ask(self, s, step: str, model: str, text: str, prompt=None):
        request = {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": text}]}
        return s.model_call(
            self.provider,
            request,
            step_id=step,
            correlation_id=f"c-{step}",
            price=PRICES[model],
            prompt=prompt,
        )

    def __call__(self, s) -> None:
        ticket = s.run.run_doc["metadata"]["ticket"]
        s.write_artifact("ticket", "support.ticket", {"text": ticket})
        s.begin_step("classify")
        answer = self.ask(s, "classify", "claude-haiku-4-5", f"Classify: {ticket}")
        s.write_artifact("category", "support.category", {"text": answer.text}, step_id="classify")
        s.complete_step("classify")
        s.begin_step("draft")
        model = s.configurable.get("draftModel", "claude-sonnet-4-5")
        prompt = s.prompt("support/draft")  # production's version; an experiment's in its forks
        text = prompt.compile(ticket=ticket) if prompt else f"Reply to: {ticket}"
        reply = self.ask(s, "draft", model, text, prompt=prompt)
        s.write_artifact("reply", "support.reply", {"text": reply.text, "model": model}, step_id="draft")
        if s.configurable.get("extraReview"):  # a review nobody has decided yet: the fork waits
            s.request_gate("draft", "CHECKPOINT", checkpoint="extra", reason="A second look")
            s.gate_decision("draft", "CHECKPOINT", "approved", checkpoint="extra")
        s.complete_step("draft")
        s.request_gate("draft", "PAUSE_AFTER", reason="Check the reply")
        if s.gate_decision("draft", "PAUSE_AFTER", "approved", note="reads well") != "approved":
            s.fail("the reply was rejected")
            return
        s.complete()
