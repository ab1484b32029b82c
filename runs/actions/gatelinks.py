"""E-mailed decision links: made when a gate e-mail is sent, checked when opened, used once.

A link is ``<site>/gate-links/<token>/?decision=approved`` (or ``rejected``). The token is 32
random bytes (URL-safe base64); its row (:class:`runs.models_gatelinks.GateLink`) keeps the
SHA-256 of it, the recipient, the gate, and when it expires (``WORKBENCH_EMAIL_LINK_HOURS``, 24 by
default). Opening a link decides nothing (a link scanner may open it): the page asks to confirm,
and only the POST decides, through the same action as a page decision, as the recipient, with
``{"workbench.channel": "email"}`` beside the event. The row is marked used in the transaction
that decides (a conditional UPDATE: one of two racing POSTs wins), so a link works once.

A signed-in session is required when the workspace says so (:class:`EmailLinkSettings`) or when
the gate is high-risk: the run's ``metadata["workbench.highRisk"]`` is ``true`` (every gate of the
run) or a list of step ids (their gates). The session must then be the recipient's.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from runs.actions.core import ActionError
from runs.actions.gatepolicy import do_decide_gate
from runs.actions.outbox import site_url
from runs.actions.permissions import Action, role_allows
from runs.models import Delivery, EmailLinkSettings, GateLink, Membership, Run, Workspace
from runs.protocol.values import loads
from runs.selectors.runs import find_run, run_state

HIGH_RISK_KEY = "workbench.highRisk"
DECISIONS = ("approved", "rejected")
TOKEN_BYTES = 32


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def link_hours() -> float:
    return float(getattr(settings, "WORKBENCH_EMAIL_LINK_HOURS", 24))


def is_high_risk(state_run: dict[str, Any], step_id: str) -> bool:
    """Whether a gate of this step is high-risk: the run's ``metadata["workbench.highRisk"]`` is
    ``true``, or a list holding the step's id."""
    metadata = state_run.get("metadata")
    marker = metadata.get(HIGH_RISK_KEY) if isinstance(metadata, dict) else None
    if marker is True:
        return True
    return isinstance(marker, list) and step_id in marker


def workspace_requires_sign_in(workspace_id: int) -> bool:
    return EmailLinkSettings.objects.filter(workspace_id=workspace_id, require_sign_in=True).exists()


def do_set_email_link_sign_in(*, workspace: Workspace, required: bool) -> None:
    EmailLinkSettings.objects.update_or_create(workspace=workspace, defaults={"require_sign_in": required})


@dataclass(frozen=True)
class DecisionLinks:
    approve: str
    reject: str
    expires_at: Any


def issue_links(delivery: Delivery, payload: dict) -> DecisionLinks | None:
    """The Approve/Reject links of a ``gate.requested`` e-mail to ``delivery.recipient`` (a retried
    delivery gets a new token; the one of the attempt before stops working). None when the
    payload names no gate of a run of the delivery's workspace."""
    data = payload.get("data") or {}
    gate, run_doc = data.get("gate") or {}, data.get("run") or {}
    if delivery.recipient_id is None or not gate.get("stepId") or not gate.get("gate"):
        return None
    run = Run.objects.filter(workspace_id=delivery.workspace_id, run_id=run_doc.get("id") or "").first()
    if run is None:
        return None
    token = secrets.token_urlsafe(TOKEN_BYTES)
    expires_at = timezone.now() + timedelta(hours=link_hours())
    GateLink.objects.update_or_create(
        delivery=delivery,
        defaults={
            "token_hash": token_hash(token),
            "workspace_id": delivery.workspace_id,
            "run": run,
            "step_id": gate["stepId"],
            "gate": gate["gate"],
            "checkpoint": gate.get("checkpoint") or "",
            "recipient_id": delivery.recipient_id,
            "expires_at": expires_at,
            "used_at": None,
            "decision": "",
        },
    )
    base = f"{site_url()}/gate-links/{token}/"
    return DecisionLinks(f"{base}?decision=approved", f"{base}?decision=rejected", expires_at)


# --------------------------------------------------------------------------------------------
# Opening a link


@dataclass
class LinkView:
    """What a link's page shows: ``problem`` in words (nothing to decide), ``sign_in`` (the
    visitor must sign in first), or the gate to confirm."""

    link: GateLink | None
    problem: str = ""
    code: str = ""
    sign_in: bool = False
    gate: dict | None = None
    run: Run | None = None
    state_run: dict | None = None
    step: dict | None = None
    high_risk: bool = False


UNKNOWN = "This decision link is not valid: it may have been copied incompletely, or the gate e-mail was sent again with a new link."


def open_link(token: str, user: Any) -> LinkView:
    """Check a link for ``user`` (a signed-in person, or anonymous); decides nothing."""
    if not isinstance(token, str) or not 20 <= len(token) <= 100:
        return LinkView(None, UNKNOWN, "LINK_UNKNOWN")
    link = (
        GateLink.objects.select_related("run", "recipient", "workspace")
        .filter(token_hash=token_hash(token))
        .first()
    )
    if link is None:
        return LinkView(None, UNKNOWN, "LINK_UNKNOWN")
    signed_in = bool(getattr(user, "is_authenticated", False))
    if signed_in and user.pk != link.recipient_id:
        return LinkView(
            link,
            "This decision link was sent to another person: it decides nothing for you. "
            "Open the gate from your own e-mail or from the inbox.",
            "LINK_FOREIGN",
        )
    if link.used_at is not None:
        return LinkView(
            link,
            f"This link was already used: the gate was {link.decision or 'decided'} through it on "
            f"{timezone.localtime(link.used_at):%Y-%m-%d %H:%M %Z}. A link decides once.",
            "LINK_USED",
        )
    if link.expires_at <= timezone.now():
        return LinkView(
            link,
            f"This link expired on {timezone.localtime(link.expires_at):%Y-%m-%d %H:%M %Z}. "
            "Open the gate from the inbox to decide it.",
            "LINK_EXPIRED",
        )
    recipient = link.recipient
    role = (
        Membership.objects.filter(user=recipient, workspace_id=link.workspace_id)
        .values_list("role", flat=True)
        .first()
    )
    if not recipient.is_active or not role_allows(role, Action.RESOLVE_GATE):
        return LinkView(
            link, "The person this link was sent to may no longer decide gates here.", "FORBIDDEN"
        )
    run = find_run(link.workspace, link.run.run_id)
    if run is None:
        return LinkView(link, "The run of this gate no longer exists.", "RUN_NOT_FOUND")
    state = run_state(run)
    key = (link.step_id, link.gate, link.checkpoint or None)
    gate = next(
        (g for g in state.pending_gates() if (g["stepId"], g["gate"], g.get("checkpoint")) == key), None
    )
    if gate is None:
        return LinkView(
            link,
            "This gate is no longer waiting: somebody already decided it (or the run ended). "
            "Nothing was decided through this link.",
            "GATE_DECIDED",
            run=run,
        )
    high_risk = is_high_risk(state.run, link.step_id)
    step = next(
        (s for s in state.run.get("workflowSnapshot", {}).get("steps", []) if s.get("id") == link.step_id),
        None,
    )
    view = LinkView(link, gate=gate, run=run, state_run=state.run, step=step, high_risk=high_risk)
    if not signed_in and (high_risk or workspace_requires_sign_in(link.workspace_id)):
        view.sign_in = True
    return view


def do_decide_by_link(token: str, user: Any, *, decision: str, note: str | None) -> LinkView:
    """Decide the link's gate as its recipient (channel ``email``); the view's ``problem`` says
    why nothing was decided. Raises nothing for a bad link: it says so in words."""
    if decision not in DECISIONS:
        view = open_link(token, user)
        if not view.problem:
            view.problem, view.code = "Choose Approve or Reject.", "INVALID_INPUT"
        return view
    with transaction.atomic():
        view = open_link(token, user)
        if view.problem or view.sign_in or view.link is None or view.run is None:
            return view
        link = view.link
        now = timezone.now()
        claimed = GateLink.objects.filter(pk=link.pk, used_at__isnull=True, expires_at__gt=now).update(
            used_at=now, decision=decision
        )
        if not claimed:  # another request used it a moment ago
            return LinkView(link, "This link was already used: a link decides once.", "LINK_USED")
        try:
            do_decide_gate(  # under the gate's policy: quorum, separation of duties
                workspace=link.workspace,
                run_id=view.run.run_id,
                step_id=link.step_id,
                gate=link.gate,
                decision=decision,
                note=(note or "").strip()[:4000] or None,
                checkpoint=link.checkpoint or None,
                actor=f"user:{link.recipient.get_username()}",
                channel="email",
            )
        except ActionError as exc:
            transaction.set_rollback(True)
            return LinkView(link, f"Nothing was decided: {exc.message} ({exc.code}).", exc.code, run=view.run)
    link.used_at, link.decision = now, decision
    view.link = link
    return view


def payload_of(delivery: Delivery) -> dict:
    return loads(delivery.payload)
