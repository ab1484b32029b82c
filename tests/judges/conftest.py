from __future__ import annotations

import json

import pytest
from django.utils import timezone

from judges import actions as judge_actions
from judges.models import Proposal, ProposalStatus
from runs import actions
from runs.actions.permissions import ROLE_SCOPES
from runs.actions.prompts import do_save_prompt_version
from runs.engine import commands as cmd
from tests.fakes.anthropic_api import FakeAnthropic

PROMPT = "Run {{run}}: should step {{step}} pass its {{gate}} gate? Payload: {{payload}}. Answer JSON."


@pytest.fixture
def fake(settings):
    settings.WORKBENCH_EGRESS_ALLOW = ["127.0.0.0/8", "::1/128"]
    with FakeAnthropic() as server:
        settings.WORKBENCH_JUDGE_PROVIDERS = {
            "anthropic": {"base_url": server.url, "api_key": "test-anthropic-key", "max_retries": 0}
        }
        yield server


@pytest.fixture
def judge_prompt(workspace, alice):
    return do_save_prompt_version(
        workspace, name="judges/review-gate", body=PROMPT, scopes=ROLE_SCOPES["owner"], user=alice
    )


@pytest.fixture
def judge(workspace, judge_prompt, alice):
    return judge_actions.do_create_judge(
        workspace=workspace,
        name="reviewer",
        kind="llm",
        workflow_id="wf-demo",
        step_id="review",
        gate="PAUSE_BEFORE",
        config={
            "provider": "anthropic",
            "model": "claude-haiku-4-5",
            "prompt": "judges/review-gate",
            "promptVersion": 1,
        },
        actor="user:alice",
    )


def verdict(decision: str, confidence: float = 0.95, rationale: str = "looks fine") -> dict:
    return {"text": json.dumps({"decision": decision, "confidence": confidence, "rationale": rationale})}


def waiting_run(workspace, workflow, run_id: str):
    """A run of wf-demo waiting at review's PAUSE_BEFORE gate (implied by the policy)."""
    run = actions.do_start_run(workspace=workspace, workflow=workflow, run_id=run_id, actor="user:alice")
    actions.do_commands(
        workspace=workspace,
        run_id=run_id,
        commands=[cmd.BeginStep(step_id="parse"), cmd.CompleteStep(step_id="parse")],
        actor="pipeline",
    )
    run.refresh_from_db()
    return run


def decide(workspace, run, decision: str, actor: str = "user:bob"):
    return actions.do_command(
        workspace=workspace,
        run_id=run.run_id,
        command=cmd.ResolveGate(step_id="review", gate="PAUSE_BEFORE", decision=decision),
        actor=actor,
    )


def calibrate(judge, run, n: int = 50) -> None:
    """``n`` proposals of ``judge`` on ``run`` that people decided the same way (half approvals, half
    rejections: kappa 1 on ``n`` items), so the judge is calibrated (MIN_ITEMS is 50)."""
    now = timezone.now()
    Proposal.objects.bulk_create(
        Proposal(
            judge=judge,
            run=run,
            gate_key=f"review|PAUSE_BEFORE||calibration-{i}",
            step_id="review",
            gate="PAUSE_BEFORE",
            after_seq=0,
            status=ProposalStatus.PROPOSED,
            decision=decision,
            confidence=0.95,
            outcome=decision,
            outcome_by="user:bob",
            decided_at=now,
        )
        for i in range(n)
        for decision in ["approved" if i % 2 == 0 else "rejected"]
    )
