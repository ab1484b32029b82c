"""Writes to prompts: versions, labels, protected labels and promotion requests (the one write path).

Every function takes the workspace first and the caller's scopes (a role's, or a token's) and asks
the permission table itself, so the playground, pages, REST and MCP refuse alike. A refusal is an
:class:`~runs.actions.core.ActionError` with a code; nothing is written when one is raised.

- ``do_save_prompt_version``: a new immutable version (number = previous + 1); ``latest`` follows.
- ``do_move_label``: an unprotected label moves at once; a protected one gets a pending
  :class:`PromotionRequest` instead (one per prompt and label at a time).
- ``do_decide_promotion``: approving moves the label, rejecting leaves it; who decided and when
  are kept. Whoever asked cannot approve their own request (they may withdraw it: reject).
- ``do_protect_label``: a workspace's protected labels. Rollback is moving a label back.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from runs.actions.core import ActionError
from runs.actions.permissions import Action, allows
from runs.models import (
    PromotionRequest,
    PromotionStatus,
    Prompt,
    PromptLabel,
    PromptType,
    PromptVersion,
    ProtectedLabel,
    Workspace,
)
from runs.protocol.values import dumps

LATEST = "latest"

# What stands against approving a promotion, from apps that sit above runs (evals registers one:
# "the attached experiment failed on every item"). A check takes the workspace and the request's
# experiment reference and answers a sentence, or "" when it has nothing against it.
PromotionCheck = Callable[[Workspace, str], str]
PROMOTION_CHECKS: list[PromotionCheck] = []


def register_promotion_check(check: PromotionCheck) -> None:
    """An app's AppConfig.ready adds a check (runs never imports the apps above it)."""
    if check not in PROMOTION_CHECKS:
        PROMOTION_CHECKS.append(check)


def promotion_concerns(workspace: Workspace, request: PromotionRequest) -> list[str]:
    """Why approving ``request`` needs an explicit override (empty: nothing against it)."""
    ref = request.experiment_ref or ""
    return [concern for check in PROMOTION_CHECKS if (concern := check(workspace, ref))]


NAME = re.compile(r"[\w][\w .-]{0,99}(?:/[\w][\w .-]{0,99})*")
LABEL = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
ROLES = ("system", "user", "assistant")
MAX_NAME = 200
MAX_BODY = 200_000
MAX_CONFIG = 50_000
MAX_MESSAGES = 200
MAX_TAGS = 20
MAX_NOTE = 1000


@dataclass
class LabelMove:
    """What ``do_move_label`` did: moved the label, or asked for a promotion."""

    label: PromptLabel | None = None
    request: PromotionRequest | None = None


def _require(scopes: frozenset[str], action: Action, what: str) -> None:
    if not allows(scopes, action):
        raise ActionError("FORBIDDEN", f"{what} is not allowed for this role or token")


def _printable(text: str) -> bool:
    return not any((ord(ch) < 0x20 and ch not in "\n\t\r") or 0xD800 <= ord(ch) <= 0xDFFF for ch in text)


def check_name(name: object) -> str:
    text = name.strip() if isinstance(name, str) else ""
    if not text or len(text) > MAX_NAME or not NAME.fullmatch(text) or text.endswith(" "):
        raise ActionError(
            "INVALID_INPUT",
            "a prompt name is letters, digits, spaces, '.', '_' or '-', with '/' between folders",
            "name",
        )
    return text


def check_label(label: object) -> str:
    if not isinstance(label, str) or not LABEL.fullmatch(label):
        raise ActionError(
            "INVALID_INPUT", "a label is lowercase letters, digits, '_' or '-' (40 at most)", "label"
        )
    return label


def check_body(kind: str, body: object) -> Any:
    if kind == PromptType.TEXT:
        if not isinstance(body, str) or len(body) > MAX_BODY or not _printable(body):
            raise ActionError(
                "INVALID_INPUT", "a text prompt's body is text (200,000 characters at most)", "body"
            )
        return body
    if not isinstance(body, list) or not 1 <= len(body) <= MAX_MESSAGES:
        raise ActionError("INVALID_INPUT", "a chat prompt's body is a list of 1 to 200 messages", "body")
    out = []
    for i, message in enumerate(body):
        ok = (
            isinstance(message, dict)
            and message.get("role") in ROLES
            and isinstance(message.get("content"), str)
        )
        if not ok or not _printable(message["content"]) or set(message) - {"role", "content"}:
            raise ActionError(
                "INVALID_INPUT", "each message is {role: system|user|assistant, content: text}", f"body/{i}"
            )
        out.append({"role": message["role"], "content": message["content"]})
    if sum(len(m["content"]) for m in out) > MAX_BODY:
        raise ActionError("INVALID_INPUT", "the messages are longer than 200,000 characters together", "body")
    return out


def _check_config(config: object) -> str:
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise ActionError("INVALID_INPUT", "config is an object (model and parameters)", "config")
    try:
        text = dumps(config)
    except (TypeError, ValueError):
        raise ActionError("INVALID_INPUT", "config must be plain JSON", "config") from None
    if len(text) > MAX_CONFIG:
        raise ActionError("INVALID_INPUT", "config is too large", "config")
    return text


def _check_tags(tags: object) -> list[str] | None:
    if tags is None:
        return None
    if not isinstance(tags, list) or len(tags) > MAX_TAGS:
        raise ActionError("INVALID_INPUT", "tags are a list of at most 20 short texts", "tags")
    out: list[str] = []
    for tag in tags:
        if not isinstance(tag, str) or not 0 < len(tag.strip()) <= 40 or not _printable(tag) or "\n" in tag:
            raise ActionError("INVALID_INPUT", "a tag is a text of 1 to 40 characters", "tags")
        if tag.strip() not in out:
            out.append(tag.strip())
    return out


def _note(note: object) -> str:
    text = note.strip() if isinstance(note, str) else ""
    if len(text) > MAX_NOTE or not _printable(text):
        raise ActionError("INVALID_INPUT", "the note is text of 1000 characters at most", "note")
    return text


def _point(prompt: Prompt, label: str, version: PromptVersion, user: Any) -> PromptLabel:
    row, _ = PromptLabel.objects.update_or_create(
        prompt=prompt, name=label, defaults={"version": version, "updated_by": user}
    )
    return row


def do_save_prompt_version(
    workspace: Workspace,
    *,
    name: object,
    body: object,
    scopes: frozenset[str],
    user: Any = None,
    type: object = None,
    config: object = None,
    tags: object = None,
    message: object = "",
) -> PromptVersion:
    """Save a new version of the prompt ``name`` (created with ``type`` on its first save)."""
    _require(scopes, Action.SAVE_PROMPT, "saving a prompt version")
    name = check_name(name)
    if type is not None and type not in PromptType.values:
        raise ActionError("INVALID_INPUT", "type is text or chat", "type")
    config_text = _check_config(config)
    tag_list = _check_tags(tags)
    note = _note(message)
    user = user if getattr(user, "is_authenticated", False) else None
    try:
        with transaction.atomic():
            prompt = Prompt.objects.select_for_update().filter(workspace=workspace, name=name).first()
            if prompt is None:
                prompt = Prompt.objects.create(
                    workspace=workspace,
                    name=name,
                    type=type or PromptType.TEXT,
                    tags=tag_list or [],
                    created_by=user,
                )
            elif type is not None and type != prompt.type:
                raise ActionError("PROMPT_TYPE_MISMATCH", f"{name} is a {prompt.type} prompt", "type")
            elif tag_list is not None and tag_list != prompt.tags:
                prompt.tags = tag_list
                prompt.save(update_fields=["tags"])  # Prompt has no updated_at: naming it raised
            checked = check_body(prompt.type, body)
            last = prompt.versions.aggregate(n=Max("number"))["n"] or 0
            version = PromptVersion.objects.create(
                prompt=prompt,
                number=last + 1,
                body=dumps(checked),
                config=config_text,
                message=note,
                created_by=user,
            )
            _point(prompt, LATEST, version, user)
    except IntegrityError:  # two saves of the same new prompt at once: the other one won
        raise ActionError("CONFLICT", "the prompt changed while saving; save again", "name") from None
    return version


def _version(workspace: Workspace, name: object, number: object) -> PromptVersion:
    if type(number) is not int or number < 1:
        raise ActionError("INVALID_INPUT", "version is a positive integer", "version")
    version = (
        PromptVersion.objects.select_related("prompt")
        .filter(prompt__workspace=workspace, prompt__name=name, number=number)
        .first()
    )
    if version is None:
        raise ActionError("NOT_FOUND", f"{name} has no version {number}", "version")
    return version


def is_protected(workspace: Workspace, label: str) -> bool:
    return ProtectedLabel.objects.filter(workspace=workspace, name=label).exists()


def do_move_label(
    workspace: Workspace,
    *,
    name: object,
    label: object,
    version: object,
    scopes: frozenset[str],
    user: Any = None,
    note: object = "",
    experiment_ref: object = "",
) -> LabelMove:
    """Point ``label`` at ``version``: directly, or through a promotion request when protected."""
    _require(scopes, Action.MOVE_LABEL, "moving a label")
    label = check_label(label)
    if label == LATEST:
        raise ActionError("LABEL_RESERVED", "latest always points at the newest version", "label")
    note_text = _note(note)
    ref = _note(experiment_ref)[:200]
    target = _version(workspace, name, version)
    user = user if getattr(user, "is_authenticated", False) else None
    with transaction.atomic():
        prompt = Prompt.objects.select_for_update().get(pk=target.prompt_id)
        if not is_protected(workspace, label):
            return LabelMove(label=_point(prompt, label, target, user))
        current = PromptLabel.objects.filter(prompt=prompt, name=label).first()
        if current is not None and current.version_id == target.pk:
            raise ActionError("NO_CHANGE", f"{label} already points at version {target.number}", "version")
        pending = PromotionRequest.objects.filter(
            prompt=prompt, label=label, status=PromotionStatus.PENDING
        ).first()
        if pending is not None:
            raise ActionError(
                "PROMOTION_PENDING",
                f"a promotion of {label} is already waiting for a decision",
                "label",
                details={"request": pending.pk},
            )
        request = PromotionRequest.objects.create(
            workspace=workspace,
            prompt=prompt,
            label=label,
            from_version=current.version if current else None,
            to_version=target,
            note=note_text,
            experiment_ref=ref,
            requested_by=user,
        )
    return LabelMove(request=request)


def do_decide_promotion(
    workspace: Workspace,
    *,
    request_id: object,
    approve: bool,
    scopes: frozenset[str],
    user: Any = None,
    note: object = "",
    override: bool = False,
) -> PromotionRequest:
    """Approve (the label moves) or reject (it stays) a pending promotion request. An approval
    against a concern (:func:`promotion_concerns`: its experiment failed on every item) is refused
    with EXPERIMENT_FAILED unless ``override`` says the approver saw it and approves anyway."""
    if type(request_id) is not int:
        raise ActionError("NOT_FOUND", "no such promotion request", "request")
    note_text = _note(note)
    user = user if getattr(user, "is_authenticated", False) else None
    with transaction.atomic():
        request = (
            PromotionRequest.objects.select_for_update()
            .select_related("prompt", "to_version")
            .filter(workspace=workspace, pk=request_id)
            .first()
        )
        if request is None:
            raise ActionError("NOT_FOUND", "no such promotion request", "request")
        _require(scopes, Action.DECIDE_PROMOTION, "deciding a promotion")
        if request.status != PromotionStatus.PENDING:
            raise ActionError("ALREADY_DECIDED", f"this request was already {request.status}", "request")
        if approve and user is not None and request.requested_by_id == user.pk:
            raise ActionError(
                "SELF_APPROVAL",
                "you asked for this promotion, so someone else has to approve it (you may reject it "
                "to withdraw it)",
                "request",
            )
        if approve and not override and (concerns := promotion_concerns(workspace, request)):
            raise ActionError(
                "EXPERIMENT_FAILED",
                " ".join(concerns) + " Approve with the override to move the label anyway",
                "request",
            )
        request.status = PromotionStatus.APPROVED if approve else PromotionStatus.REJECTED
        request.decided_by = user
        request.decided_at = timezone.now()
        request.decision_note = note_text
        request.save(update_fields=["status", "decided_by", "decided_at", "decision_note"])
        if approve:
            _point(request.prompt, request.label, request.to_version, user)
    return request


def do_protect_label(
    workspace: Workspace, *, label: object, protected: bool, scopes: frozenset[str], user: Any = None
) -> bool:
    """Protect (or stop protecting) ``label`` in the workspace; answers whether it is protected now."""
    _require(scopes, Action.PROTECT_LABEL, "protecting labels")
    label = check_label(label)
    if label == LATEST:
        raise ActionError("LABEL_RESERVED", "latest moves by itself with every save", "label")
    user = user if getattr(user, "is_authenticated", False) else None
    if protected:
        ProtectedLabel.objects.get_or_create(workspace=workspace, name=label, defaults={"created_by": user})
    else:
        ProtectedLabel.objects.filter(workspace=workspace, name=label).delete()
    return protected
