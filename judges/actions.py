"""The judges' write path: attach a judge to a gate, set its delegation policy, and the work of
its background task (propose, decide when delegated, join proposals with the decisions that
closed their gates, suspend delegation on drift). Gate decisions and annotations go through
``runs.actions.do_commands`` like anyone's, with the judge's actor ``judge:<name>@<version>``.
"""

from __future__ import annotations

import logging
import secrets
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F, Max
from django.utils import timezone

from judges import calls, stats
from judges.models import (
    MIN_FLOOR,
    MIN_ITEMS,
    Delegation,
    GateJudge,
    JudgeKind,
    Proposal,
    ProposalStatus,
)
from judges.selectors import agreement_of, judges_for_workflow, watches
from review.rules import in_sample, parse_rules
from runs import actions
from runs.actions import ActionError
from runs.actions.budgets import is_budget_gate
from runs.actions.decisions import record_decision_policy
from runs.actions.outbox import JUDGE_SUSPENDED, site_url, tell_owners
from runs.actions.overrule import OVERRULE_TAG
from runs.engine import commands as cmd
from runs.models import Run, RunFork, Workspace
from runs.selectors.gatepolicy import policy_for
from runs.selectors.gates import gate_decision
from runs.selectors.prompts import find_version
from runs.selectors.runs import run_state

log = logging.getLogger("workbench.judges")

GATES = ("PAUSE_BEFORE", "PAUSE_AFTER", "CHECKPOINT")
PROVIDERS = ("anthropic", "openai")
MIN_AUDIT = 10  # audit-sample decisions since delegation began before drift is judged
MAX_ROUNDS = 20  # gates a judge may decide one after another in one run in one task
INVALID = "INVALID_INPUT"
NOT_EARNED = "DELEGATION_NOT_EARNED"
NOT_CALIBRATED = "JUDGE_NOT_CALIBRATED"


def _text(raw: Any, field: str, limit: int = 200, *, required: bool = True) -> str:
    if raw is None and not required:
        return ""
    if not isinstance(raw, str) or (required and not raw.strip()):
        raise ActionError(INVALID, f"{field} is a non-empty string", field)
    return raw.strip()[:limit]


def _budget(raw: Any) -> Decimal | None:
    if raw in (None, ""):
        return None
    try:
        value = Decimal(str(raw))
    except InvalidOperation:
        raise ActionError(INVALID, "budget is an amount in USD (a number of 0 or more)", "budget") from None
    if not value.is_finite() or value < 0 or value >= Decimal(10**6):
        raise ActionError(INVALID, "budget is an amount in USD (a number of 0 or more)", "budget")
    return value


def check_config(workspace: Workspace, kind: str, config: Any) -> dict[str, Any]:
    if not isinstance(config, dict):
        raise ActionError(INVALID, "config is an object", "config")
    if kind == JudgeKind.RULE:
        try:
            rules = parse_rules(config.get("rules"))
        except ValueError as exc:
            raise ActionError(INVALID, str(exc), "config.rules") from None
        if not rules:
            raise ActionError(
                INVALID, "a code rule needs rules (review rules: rejectedGates, errors, ...)", "config.rules"
            )
        on_match = config.get("onMatch", "rejected")
        if on_match not in ("approved", "rejected"):
            raise ActionError(INVALID, "onMatch is approved or rejected", "config.onMatch")
        return {"rules": rules, "onMatch": on_match}
    if kind != JudgeKind.LLM:
        raise ActionError(INVALID, "kind is llm or rule", "kind")
    provider = config.get("provider", "anthropic")
    if provider not in PROVIDERS:
        raise ActionError(INVALID, f"provider is one of {', '.join(PROVIDERS)}", "config.provider")
    model = _text(config.get("model"), "config.model")
    name = _text(config.get("prompt"), "config.prompt")
    number = config.get("promptVersion")
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ActionError(
            INVALID, "promptVersion is a version number of the prompt (1 or more)", "config.promptVersion"
        )
    if find_version(workspace, name, version=number) is None:
        raise ActionError("PROMPT_NOT_FOUND", f"prompt {name!r} has no version {number}", "config.prompt")
    return {"provider": provider, "model": model, "prompt": name, "promptVersion": number}


def do_create_judge(
    *,
    workspace: Workspace,
    name: Any,
    kind: Any,
    workflow_id: Any,
    step_id: Any,
    gate: Any,
    checkpoint: Any = "",
    config: Any = None,
    budget: Any = None,
    actor: str = "",
) -> GateJudge:
    """A judge for one gate (a new version when the name exists: the older versions stop)."""
    name = _text(name, "name", 100)
    if "@" in name or ":" in name:
        raise ActionError(INVALID, "a judge's name holds no '@' or ':'", "name")
    workflow_id = _text(workflow_id, "workflowId")
    step_id = _text(step_id, "stepId")
    if gate not in GATES:
        raise ActionError(INVALID, f"gate is one of {', '.join(GATES)}", "gate")
    checkpoint = _text(checkpoint or None, "checkpoint", required=False)
    if checkpoint and gate != "CHECKPOINT":
        raise ActionError(INVALID, "a checkpoint name goes with gate CHECKPOINT", "checkpoint")
    if is_budget_gate(gate, checkpoint):
        raise ActionError(
            INVALID,
            "a judge does not watch a run's budget gate: going on there spends money, which a person decides",
            "checkpoint",
        )
    kind = str(kind or "")
    clean = check_config(workspace, kind, config)
    amount = _budget(budget)
    with transaction.atomic():
        older = GateJudge.objects.select_for_update().filter(workspace=workspace, name=name)
        version = (older.aggregate(v=Max("version"))["v"] or 0) + 1
        older.update(enabled=False)
        try:
            return GateJudge.objects.create(
                workspace=workspace,
                judge_id=f"jg_{secrets.token_hex(10)}",
                name=name,
                version=version,
                kind=kind,
                workflow_id=workflow_id,
                step_id=step_id,
                gate=gate,
                checkpoint=checkpoint,
                config=clean,
                budget=amount,
                created_by=actor[:200],
            )
        except IntegrityError:
            raise ActionError(
                "CONFLICT", "another version of this judge was saved at the same time"
            ) from None


def _number(raw: Any, field: str, low: float, high: float) -> float:
    if isinstance(raw, bool):
        raise ActionError(INVALID, f"{field} is a number from {low:g} to {high:g}", field)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ActionError(INVALID, f"{field} is a number from {low:g} to {high:g}", field) from None
    if not low <= value <= high:
        raise ActionError(INVALID, f"{field} is a number from {low:g} to {high:g}", field)
    return value


def _require_calibrated(judge: GateJudge) -> None:
    """Reviewers may see the judge's proposals before they decide only once it is calibrated: the
    condition delegation needs (kappa at or above the floor on at least 50 human-decided items in
    the window). Until then their labels stay independent (JUDGE_NOT_CALIBRATED)."""
    earned, why = stats.meets(agreement_of(judge), floor=judge.kappa_floor, min_items=MIN_ITEMS)
    if not earned:
        raise ActionError(
            NOT_CALIBRATED,
            f"reviewers see proposals only once the judge is calibrated: {why}",
            "showToReviewers",
        )


def do_set_policy(
    judge: GateJudge,
    *,
    delegation: Any = None,
    min_confidence: Any = None,
    kappa_floor: Any = None,
    audit_percent: Any = None,
    window_days: Any = None,
    online_percent: Any = None,
    show_to_reviewers: Any = None,
    budget: Any = ...,
    enabled: Any = None,
) -> GateJudge:
    """Change what the owner controls; a field left None keeps its value. Letting the judge decide
    is refused (DELEGATION_NOT_EARNED) until its agreement with people earns it: kappa at or above
    the floor on at least 50 human-decided items of the gate in the window. The floor may be
    raised, never set below 0.6 (FLOOR_TOO_LOW). Showing proposals to reviewers is refused on the
    same condition (JUDGE_NOT_CALIBRATED)."""
    changes: dict[str, Any] = {}
    if delegation is not None:
        if delegation not in Delegation.values:
            raise ActionError(INVALID, f"delegation is one of {', '.join(Delegation.values)}", "delegation")
        changes["delegation"] = delegation
    if kappa_floor is not None:
        floor = _number(kappa_floor, "kappaFloor", -1, 1)
        if floor < MIN_FLOOR:
            raise ActionError("FLOOR_TOO_LOW", f"the kappa floor is at least {MIN_FLOOR:g}", "kappaFloor")
        changes["kappa_floor"] = floor
    if min_confidence is not None:
        changes["min_confidence"] = _number(min_confidence, "minConfidence", 0, 1)
    if audit_percent is not None:
        changes["audit_percent"] = _number(audit_percent, "auditPercent", 1, 100)
    if window_days is not None:
        changes["window_days"] = int(_number(window_days, "windowDays", 1, 365))
    if online_percent is not None:
        changes["online_percent"] = _number(online_percent, "onlinePercent", 0, 100)
    for field, raw in (("show_to_reviewers", show_to_reviewers), ("enabled", enabled)):
        if raw is not None:
            if not isinstance(raw, bool):
                raise ActionError(INVALID, f"{field} is true or false", field)
            changes[field] = raw
    if budget is not ...:
        changes["budget"] = _budget(budget)
    with transaction.atomic():
        judge = GateJudge.objects.select_for_update().get(pk=judge.pk)
        was, shown = judge.delegation, judge.show_to_reviewers
        for field, value in changes.items():
            setattr(judge, field, value)
        if judge.show_to_reviewers and not shown:
            _require_calibrated(judge)
        if judge.delegation != Delegation.OFF and (
            was == Delegation.OFF
            or judge.suspended_at
            or "kappa_floor" in changes
            or "window_days" in changes
        ):
            earned, why = stats.meets(agreement_of(judge), floor=judge.kappa_floor, min_items=MIN_ITEMS)
            if not earned:
                raise ActionError(NOT_EARNED, f"delegation is not earned: {why}", "delegation")
            if was == Delegation.OFF or judge.suspended_at:
                judge.delegated_at = timezone.now()
            judge.suspended_at = None
            judge.suspended_reason = ""
        if judge.budget is None or judge.spent < judge.budget:
            judge.budget_said = False
        judge.save()
    return judge


# ---- the background work of one run (judges.tasks.judge_run)


def _gate_key(gate: dict[str, Any]) -> str:
    return "|".join(
        (gate["stepId"], gate["gate"], gate.get("checkpoint") or "", gate.get("eventId") or "implied")
    )


def _policy(judge: GateJudge, verdict_confidence: float, agreement: dict[str, Any]) -> dict[str, Any]:
    return {
        "judge": judge.actor,
        "judgeId": judge.judge_id,
        "delegation": judge.delegation,
        "minConfidence": judge.min_confidence,
        "confidence": verdict_confidence,
        "kappaFloor": judge.kappa_floor,
        "kappa": agreement["kappa"],
        "items": agreement["n"],
        "auditPercent": judge.audit_percent,
        "windowDays": judge.window_days,
    }


def _annotation(judge: GateJudge, proposal: Proposal) -> cmd.Annotate:
    where = f"CHECKPOINT “{proposal.checkpoint}”" if proposal.checkpoint else proposal.gate
    text = (
        f"Judge {judge.label} proposes {proposal.decision} for {where} on {proposal.step_id} "
        f"(confidence {proposal.confidence:.2f}): {proposal.rationale}"
    )[:4000]
    return cmd.Annotate(text=text, tags=("judge-proposal", judge.actor), step_id=proposal.step_id)


def _annotate(judge: GateJudge, run: Run, proposal: Proposal) -> None:
    try:
        result = actions.do_command(
            workspace=run.workspace,
            run_id=run.run_id,
            command=_annotation(judge, proposal),
            actor=judge.actor,
        )
    except ActionError as exc:
        log.info("judge %s: proposal on %s not annotated: %s", judge.label, run.run_id, exc)
        return
    Proposal.objects.filter(pk=proposal.pk).update(annotation_seq=result.last_seq or None)


def _say_budget_spent(judge: GateJudge, run: Run, proposal: Proposal, *, why: str = "") -> None:
    """The judge stops proposing and says so: once on the judge's page (budget_said), and on
    each run whose gate it did not judge. ``why``: the workspace's cap refused the call (else the
    judge's own budget is spent)."""
    GateJudge.objects.filter(pk=judge.pk).update(budget_said=True)
    spent = why or f"its budget of USD {judge.budget} is spent"
    text = f"Judge {judge.label} did not judge {proposal.gate} on {proposal.step_id}: {spent}."
    try:
        actions.do_command(
            workspace=run.workspace,
            run_id=run.run_id,
            command=cmd.Annotate(text=text, tags=("judge-budget", judge.actor), step_id=proposal.step_id),
            actor=judge.actor,
        )
    except ActionError as exc:
        log.info("judge %s: budget note on %s not recorded: %s", judge.label, run.run_id, exc)


def _may_decide(judge: GateJudge, run: Run, proposal: Proposal) -> tuple[bool, dict[str, Any] | None]:
    """(audit, policy): the policy when the judge may decide this gate now, None otherwise. Never
    a run's ``budget`` gate (going on spends money), nor a gate whose policy counts votes (a quorum
    or several rejections asks for that many people): the judge proposes, people decide."""
    if judge.delegation == Delegation.OFF or judge.suspended_at is not None:
        return False, None
    if is_budget_gate(proposal.gate, proposal.checkpoint or None):
        return False, None
    if policy_for(run, run_state(run).run, proposal.step_id).needs_votes:
        return False, None
    if proposal.confidence is None or proposal.confidence < judge.min_confidence:
        return False, None
    if judge.delegation == Delegation.APPROVE and proposal.decision != "approved":
        return False, None
    agreement = agreement_of(judge)
    earned, _why = stats.meets(agreement, floor=judge.kappa_floor, min_items=MIN_ITEMS)
    if not earned:
        return False, None
    if in_sample(f"{run.run_id}|{proposal.gate_key}", judge.audit_percent):
        return True, None  # the audit share: people decide, agreement keeps being measured
    return False, _policy(judge, proposal.confidence, agreement)


def _decide(judge: GateJudge, run: Run, proposal: Proposal, policy: dict[str, Any]) -> bool:
    note = (
        f"Decided by judge {judge.label} under its delegation policy ({judge.delegation}, confidence "
        f"{proposal.confidence:.2f} >= {judge.min_confidence:g}, kappa {policy['kappa']:.3f} >= "
        f"{judge.kappa_floor:g} on {policy['items']} human decisions)"
    )
    try:
        with transaction.atomic():  # the decision and the policy beside it land together
            result = actions.do_commands(
                workspace=run.workspace,
                run_id=run.run_id,
                commands=[
                    _annotation(judge, proposal),
                    cmd.ResolveGate(
                        step_id=proposal.step_id,
                        gate=proposal.gate,
                        decision=proposal.decision,
                        note=note,
                        checkpoint=proposal.checkpoint or None,
                    ),
                ],
                actor=judge.actor,
                channel="judge",
            )
            for event in result.events:
                if event.get("type") == "human_gate_resolved":
                    record_decision_policy(result.run, event["id"], policy)
    except ActionError as exc:  # decided meanwhile, run ended: people's decision stands
        log.info("judge %s: no decision on %s: %s", judge.label, run.run_id, exc)
        return False
    Proposal.objects.filter(pk=proposal.pk).update(
        delegated=True, policy=policy, annotation_seq=result.first_seq or None
    )
    return True


def propose(judge: GateJudge, run: Run, gate: dict[str, Any]) -> bool:
    """Judge one pending gate once (a second call for the same gate request does nothing);
    True when the judge decided the gate itself."""
    try:
        with transaction.atomic():  # a savepoint: a duplicate leaves the caller's transaction usable
            proposal = Proposal.objects.create(
                judge=judge,
                run=run,
                gate_key=_gate_key(gate)[:500],
                step_id=gate["stepId"],
                gate=gate["gate"],
                checkpoint=gate.get("checkpoint") or "",
                after_seq=run.last_seq,
            )
    except IntegrityError:
        return False  # judged already (or being judged by another worker)
    judge.refresh_from_db()
    if judge.budget is not None and judge.spent >= judge.budget:
        proposal.status = ProposalStatus.OVER_BUDGET
        proposal.save(update_fields=["status"])
        _say_budget_spent(judge, run, proposal)
        return False
    try:
        verdict = calls.ask(judge, run, run_state(run), gate)
    except calls.JudgeOverBudget as exc:  # the workspace's monthly cap: no provider was asked
        proposal.status, proposal.error = ProposalStatus.OVER_BUDGET, str(exc)[:500]
        proposal.save(update_fields=["status", "error"])
        _say_budget_spent(judge, run, proposal, why=str(exc))
        return False
    except (calls.JudgeFailed, ActionError) as exc:
        proposal.status, proposal.error = ProposalStatus.FAILED, str(exc)[:500]
        proposal.save(update_fields=["status", "error"])
        return False
    proposal.status = ProposalStatus.PROPOSED
    proposal.decision, proposal.confidence, proposal.rationale = (
        verdict.decision,
        verdict.confidence,
        verdict.rationale,
    )
    proposal.cost, proposal.judge_run_id, proposal.latency_ms = (
        verdict.cost,
        verdict.run_id,
        verdict.latency_ms,
    )
    audit, policy = _may_decide(judge, run, proposal)
    proposal.audit = audit
    proposal.save()
    if verdict.cost:
        GateJudge.objects.filter(pk=judge.pk).update(spent=F("spent") + verdict.cost)
    if judge.budget_said:  # it could call again (the workspace's cap was raised): no longer said
        GateJudge.objects.filter(pk=judge.pk).update(budget_said=False)
    if policy is not None:
        return _decide(judge, run, proposal, policy)
    if judge.show_to_reviewers:
        _annotate(judge, run, proposal)
    return False


def record_outcomes(run: Run) -> list[Proposal]:
    """Join the run's open proposals with the decisions that closed their gates; returns those
    newly decided by a person."""
    decided: list[Proposal] = []
    for proposal in Proposal.objects.filter(run=run, outcome="").select_related("judge"):
        found = gate_decision(
            run,
            step_id=proposal.step_id,
            gate=proposal.gate,
            checkpoint=proposal.checkpoint or None,
            after_seq=proposal.after_seq,
        )
        if found is None:
            continue
        proposal.outcome = str(found["decision"])
        proposal.outcome_by = str(found.get("by") or "")[:200]
        proposal.outcome_seq = found["seq"]
        proposal.decided_at = timezone.now()
        proposal.save(update_fields=["outcome", "outcome_by", "outcome_seq", "decided_at"])
        if proposal.human:
            decided.append(proposal)
            if proposal.status == ProposalStatus.PROPOSED and proposal.annotation_seq is None:
                _annotate(proposal.judge, run, proposal)  # shown now: the person decided on their own
    return decided


def _drift(judge: GateJudge) -> str:
    """Why a running delegation no longer holds, "" while it does: the audit sample (at least
    MIN_AUDIT decisions since delegation began) or the whole window agreeing less than the floor."""
    audit = agreement_of(judge, audit_only=True)
    if audit["n"] >= MIN_AUDIT and stats.below_floor(audit, floor=judge.kappa_floor):
        shown = "undefined" if audit["kappa"] is None else f"{audit['kappa']:.3f}"
        return f"kappa {shown} on the audit sample ({audit['n']} decisions) fell below the floor {judge.kappa_floor:g}"
    window = agreement_of(judge)
    if window["n"] >= MIN_ITEMS and stats.below_floor(window, floor=judge.kappa_floor):
        shown = "undefined" if window["kappa"] is None else f"{window['kappa']:.3f}"
        return f"kappa {shown} on the window ({window['n']} decisions) fell below the floor {judge.kappa_floor:g}"
    return ""


def check_drift(judge: GateJudge) -> bool:
    """Suspend a delegation whose people's decisions agree less than the floor, and hide its pending
    proposals from reviewers again if they were shown; the owners are told once (the suspension and
    its message are one transaction, under the judge's row lock)."""
    with transaction.atomic():
        judge = GateJudge.objects.select_for_update().get(pk=judge.pk)
        if judge.delegation == Delegation.OFF or judge.suspended_at is not None:
            return False
        reason = _drift(judge)
        if not reason:
            return False
        audit = agreement_of(judge, audit_only=True)
        judge.suspended_at = timezone.now()
        judge.suspended_reason = reason[:500]
        # proposals shown to reviewers needed the calibration that no longer holds: hidden again
        # (an owner may show them once more when the judge is calibrated: do_set_policy checks)
        hidden = judge.show_to_reviewers
        judge.show_to_reviewers = False
        judge.save(update_fields=["suspended_at", "suspended_reason", "show_to_reviewers"])
        tell_owners(
            judge.workspace,
            JUDGE_SUSPENDED,
            {
                "judge": {
                    "id": judge.judge_id,
                    "label": judge.label,
                    "gate": judge.gate_label,
                    "url": f"{site_url()}/judges/{judge.judge_id}/",
                },
                "reason": judge.suspended_reason,
                "hiddenFromReviewers": hidden,
                "auditSample": {k: audit[k] for k in ("n", "kappa", "tpr", "tnr")},
            },
        )
    return True


def people_chose(run: Run) -> set[str]:
    """Steps whose gate decision the person who forked the run named (a branch's ``gateDecisions``,
    e.g. an overrule of a machine decision): no judge proposes or decides there."""
    fork = RunFork.objects.filter(run=run).values_list("mode", "overlay").first()
    if fork is None or fork[0] != "branch" or not isinstance(fork[1], dict):
        return set()
    decisions = fork[1].get("gateDecisions")
    return set(decisions) if isinstance(decisions, dict) else set()


def record_overrule(run: Run) -> GateJudge | None:
    """When ``run`` is a person's overrule of a judge's decision (runs.actions.overrule: a branch
    tagged ``overrule`` from the judge's ``human_gate_resolved``, naming the person's decision), the
    proposal behind that decision takes the person's decision as its label, once; its judge is
    returned (its agreement changed: drift is checked). Anything else: None, nothing written."""
    fork = (
        RunFork.objects.filter(run=run, mode="branch").values_list("source_id", "from_seq", "overlay").first()
    )
    if fork is None or fork[0] is None or not isinstance(fork[2], dict):
        return None
    source_pk, from_seq, overlay = fork
    if OVERRULE_TAG not in (overlay.get("tags") or ()) or not isinstance(overlay.get("gateDecisions"), dict):
        return None
    proposal = (
        Proposal.objects.filter(run_id=source_pk, outcome_seq=from_seq, overruled="", delegated=True)
        .select_related("judge")
        .first()
    )
    chosen = overlay["gateDecisions"].get(proposal.step_id) if proposal is not None else None
    decision = chosen.get("decision") if isinstance(chosen, dict) else chosen
    if proposal is None or decision not in ("approved", "rejected") or decision == proposal.outcome:
        return None
    proposal.overruled, proposal.overruled_by = decision, (run.created_by or "")[:200]
    proposal.save(update_fields=["overruled", "overruled_by"])
    return proposal.judge


def judge_run(run_pk: int) -> str:
    """The task's work for one run: join decisions, check drift, then propose (and decide, where
    delegated) on each pending gate a judge watches. Idempotent: a gate request is judged once."""
    run = Run.unscoped.select_related("workspace").filter(pk=run_pk).first()
    if run is None:
        return "gone"
    judges = judges_for_workflow(run.workspace_id, run.workflow_id)
    if not judges:
        return "no judge"
    overruled = record_overrule(run)
    for judge in {p.judge for p in record_outcomes(run)} | ({overruled} if overruled else set()):
        check_drift(judge)
    chosen = people_chose(run)
    for _ in range(MAX_ROUNDS):
        run.refresh_from_db()
        decided = False
        for gate in run_state(run).pending_gates():
            if gate["stepId"] in chosen:
                continue  # a branch whose creator named this gate's decision (an overrule): theirs
            for judge in judges:
                if watches(judge, gate):
                    decided = propose(judge, run, gate) or decided
        if not decided:
            break
        record_outcomes(run)
    return "judged"
