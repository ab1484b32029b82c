"""What a Slack app posts: the gate message (Block Kit: Approve, Reject, Reject with a note,
Open; a run's ``budget`` gate: Stop the run, Open the run), its decided form, the "Reject with a note" modal, and thread replies. Pure.

Every button carries the gate it decides in its ``value`` (``{"h": hook, "r": run, "s": step,
"g": gate, "c": checkpoint}``): the interaction endpoint finds the hook (and so the signing
secret that must have signed the request) from it, and decides nothing before the signature is
checked."""

from __future__ import annotations

import json
from typing import Any

from runs.notifications.messages import is_budget_gate, lines, slack_escape, slack_message

APPROVE = "wb_approve"
REJECT = "wb_reject"
REJECT_NOTE = "wb_reject_note"
OPEN = "wb_open"
NOTE_MODAL = "wb_reject_note_modal"
NOTE_BLOCK = "note"
NOTE_INPUT = "note"
DECISIONS = {APPROVE: "approved", REJECT: "rejected"}


def _obj(value: object) -> dict:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def gate_ref(hook_id: str, data: dict[str, Any]) -> dict[str, Any]:
    run = _obj(data.get("run"))
    gate = _obj(data.get("gate"))
    return {
        "h": hook_id,
        "r": run.get("id"),
        "s": gate.get("stepId"),
        "g": gate.get("gate"),
        "c": gate.get("checkpoint"),
    }


def _button(text: str, action_id: str, value: str, style: str | None = None) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": text},
        "value": value,
    }
    if style:
        button["style"] = style
    return button


def gate_message(message: dict[str, Any], hook_id: str) -> dict[str, Any]:
    """``{text, blocks}`` of a ``gate.requested`` message with its four buttons."""
    base = slack_message(message)
    headline, details, link, _label = lines(message)
    data = message.get("data") or {}
    value = json.dumps(gate_ref(hook_id, data), separators=(",", ":"))
    if is_budget_gate(_obj(data.get("gate"))):
        # no Approve: the run goes on only with a new budget, named on the run's page
        elements = [_button("Stop the run", REJECT, value, "danger")]
        if link:
            elements.append({**_button("Open the run", OPEN, value, "primary"), "url": link})
        actions = {"type": "actions", "block_id": "wb_gate", "elements": elements}
        return {"text": base["text"], "blocks": [base["blocks"][0], actions]}
    elements = [
        _button("Approve", APPROVE, value, "primary"),
        _button("Reject", REJECT, value, "danger"),
        _button("Reject with a note", REJECT_NOTE, value),
    ]
    if link:
        elements.append({**_button("Open", OPEN, value), "url": link})
    blocks = [base["blocks"][0], {"type": "actions", "block_id": "wb_gate", "elements": elements}]
    return {"text": base["text"], "blocks": blocks}


def decided_message(message: dict[str, Any], who: str) -> dict[str, Any]:
    """The gate message once decided (``gate.resolved``): the buttons replaced by who decided how."""
    data = message.get("data") or {}
    gate = _obj(data.get("gate"))
    decision = str(gate.get("decision") or "decided")
    channel = f" in {gate['channel']}" if gate.get("channel") and gate.get("channel") != "page" else ""
    said = f"{decision.capitalize()} by {who}{channel}"
    base = slack_message(message)
    blocks = [
        base["blocks"][0],
        {"type": "context", "elements": [{"type": "mrkdwn", "text": slack_escape(said)}]},
    ]
    return {"text": slack_escape(said), "blocks": blocks}


def thread_reply(message: dict[str, Any]) -> dict[str, Any]:
    """A run's end, said in the gate message's thread."""
    return slack_message(message)


def note_modal(value: str) -> dict[str, Any]:
    """The "Reject with a note" modal (views.open); ``value`` is the button's gate reference."""
    return {
        "type": "modal",
        "callback_id": NOTE_MODAL,
        "private_metadata": value,
        "title": {"type": "plain_text", "text": "Reject with a note"},
        "submit": {"type": "plain_text", "text": "Reject"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {
                "type": "input",
                "block_id": NOTE_BLOCK,
                "label": {"type": "plain_text", "text": "Why is it rejected?"},
                "element": {
                    "type": "plain_text_input",
                    "action_id": NOTE_INPUT,
                    "multiline": True,
                    "max_length": 3000,
                },
            }
        ],
    }


def parse_ref(text: object) -> dict[str, Any] | None:
    """A button's gate reference, or None when it is not one of ours."""
    if not isinstance(text, str) or len(text) > 2000:
        return None
    try:
        ref = json.loads(text)
    except ValueError:
        return None
    if not isinstance(ref, dict) or not all(isinstance(ref.get(k), str) for k in ("h", "r", "s", "g")):
        return None
    if ref.get("c") is not None and not isinstance(ref.get("c"), str):
        return None
    return ref
