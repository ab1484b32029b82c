"""What a person reads: the Slack message and the e-mail for each notification. Pure."""

from __future__ import annotations

from typing import Any

SUBJECTS = {
    "gate.requested": "A gate is waiting for you",
    "gate.resolved": "A gate was decided",
    "gate.escalated": "A gate has waited past its limit",
    "run.completed": "Run completed",
    "run.failed": "Run failed",
    "run.cancelled": "Run cancelled",
    "run.diverged": "Replay diverged",
    "webhook.test": "Test event",
    "webhook.disabled": "A webhook was disabled",
    "monitor.state_changed": "Monitor",
    "judge.suspended": "A gate judge's delegation was suspended",
    "budget.exceeded": "The workspace passed its monthly budget",
}
MONITOR_HEADLINES = {"alert": "Monitor alert", "warning": "Monitor warning", "ok": "Monitor resolved"}


def _run(data: dict) -> dict:
    run = data.get("run")
    return run if isinstance(run, dict) else {}


def _gate(data: dict) -> dict:
    gate = data.get("gate")
    return gate if isinstance(gate, dict) else {}


def is_budget_gate(gate: dict) -> bool:
    """A run's ``budget`` checkpoint: it goes on only when a person raises the run's budget (an
    approval alone is refused with BUDGET_LIMIT_REQUIRED), so no message offers an Approve."""
    return gate.get("gate") == "CHECKPOINT" and gate.get("checkpoint") == "budget"


BUDGET_HOW = (
    "The run waits at its budget: open the run to raise its budget and let it go on "
    "(an approval alone is refused), or stop it here."
)


def _title(data: dict) -> str:
    run = _run(data)
    return run.get("title") or run.get("id") or ""


def lines(message: dict[str, Any]) -> tuple[str, list[str], str | None, str | None]:
    """(headline, detail lines, link, link label) of one ``{type, timestamp, data}`` message."""
    kind = message.get("type", "")
    data = message.get("data") or {}
    run, gate = _run(data), _gate(data)
    headline = SUBJECTS.get(kind, kind)
    details: list[str] = []
    if run:
        details.append(f"Run: {_title(data)}")
    if data.get("workspace"):
        details.append(f"Workspace: {data['workspace']}")
    if gate.get("stepId"):
        details.append(f"Step: {gate['stepId']} ({gate.get('gate')})")
    if gate.get("reason"):
        details.append(f"Reason: {gate['reason']}")
    if kind == "gate.requested" and is_budget_gate(gate):
        details.append(BUDGET_HOW)
    if gate.get("decision"):
        details.append(
            f"Decision: {gate['decision']}" + (f" by {gate['decidedBy']}" if gate.get("decidedBy") else "")
        )
    if run.get("reason"):
        details.append(f"Reason: {run['reason']}")
    if kind == "monitor.state_changed":
        return _monitor_lines(data)
    if kind == "webhook.disabled":
        details += [f"Webhook: {data.get('url')}", f"Why: {data.get('reason')}"]
        return headline, details, data.get("settingsUrl"), "Open the webhook settings"
    if kind == "gate.escalated" and isinstance(data.get("escalation"), dict):
        waited = data["escalation"].get("waitedSeconds")
        details.append(f"Waiting: {waited} s (limit {data['escalation'].get('afterSeconds')} s)")
    if kind == "judge.suspended":
        found = data.get("judge")
        judge: dict = found if isinstance(found, dict) else {}
        details += [
            f"Judge: {judge.get('label')}",
            f"Gate: {judge.get('gate')}",
            f"Why: {data.get('reason')}",
        ]
        if data.get("hiddenFromReviewers"):
            details.append("Its proposals are hidden from reviewers again (show to reviewers is off).")
        return headline, details, judge.get("url"), "Open the judge"
    if kind == "budget.exceeded":
        found = data.get("budget")
        budget: dict = found if isinstance(found, dict) else {}
        details += [
            f"Spent this month: {budget.get('spent')} (cap {budget.get('cap')})",
            f"Why: {data.get('reason')}",
        ]
        return headline, details, budget.get("url"), "Open the budgets"
    if kind in ("gate.requested", "gate.escalated"):
        return headline, details, gate.get("url"), "Open the gate"
    if run.get("url"):
        return headline, details, run["url"], "Open the run"
    return headline, details, None, None


def _monitor_lines(data: dict) -> tuple[str, list[str], str | None, str | None]:
    found = data.get("monitor")
    monitor: dict = found if isinstance(found, dict) else {}
    headline = (
        f"{MONITOR_HEADLINES.get(str(data.get('to')), 'Monitor')}: {monitor.get('name') or monitor.get('id')}"
    )
    unit = monitor.get("unit") or ""
    value = data.get("value")
    shown = (
        "no data"
        if value is None
        else f"{value:g} {unit}".strip()
        if isinstance(value, (int, float))
        else str(value)
    )
    lines = [
        f"State: {data.get('from')} -> {data.get('to')}",
        f"Value: {shown} ({monitor.get('metric')})",
        f"Lines: warning {monitor.get('warning') if monitor.get('warning') is not None else '-'}, alert {monitor.get('alert')}",
    ]
    if data.get("workspace"):
        lines.append(f"Workspace: {data['workspace']}")
    return headline, lines, data.get("dashboardUrl"), "Open the dashboard"


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_message(message: dict[str, Any]) -> dict[str, Any]:
    """A Slack incoming-webhook body: a fallback text, a section and an "Open the gate" button."""
    headline, details, link, label = lines(message)
    text = "\n".join([f"*{_slack_escape(headline)}*", *(_slack_escape(d) for d in details)])
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]
    if link:
        blocks.append(
            {
                "type": "actions",
                "elements": [{"type": "button", "text": {"type": "plain_text", "text": label}, "url": link}],
            }
        )
    # The fallback text (notifications, screen readers) is mrkdwn too: a title holding
    # "<!channel>" or "<https://x|y>" must read as text, never ping or link.
    fallback = _slack_escape(f"{headline}: {_title(message.get('data') or {})}".rstrip(": "))
    return {"text": fallback, "blocks": blocks}


def email_message(
    message: dict[str, Any],
    *,
    site_name: str = "Workbench",
    decision_links: tuple[str, str] | None = None,
    links_valid_for: str = "24 hours",
) -> tuple[str, str]:
    """(subject, plain-text body). ``decision_links``: the recipient's (Approve, Reject) links of a
    gate e-mail; each opens a page that asks to confirm (opening one decides nothing)."""
    headline, details, link, label = lines(message)
    title = _title(message.get("data") or {})
    subject = f"[{site_name}] {headline}" + (f": {title}" if title else "")
    body = [headline, "", *details]
    budget_gate = message.get("type") == "gate.requested" and is_budget_gate(_gate(message.get("data") or {}))
    if decision_links and budget_gate:
        body += [
            "",
            f"Stop the run at its budget: {decision_links[1]}",
            f"The link opens a page that asks you to confirm; it works once, for you only, for {links_valid_for}.",
        ]
    elif decision_links:
        approve, reject = decision_links
        body += [
            "",
            f"Approve: {approve}",
            f"Reject: {reject}",
            f"Each link opens a page that asks you to confirm; it works once, for you only, for {links_valid_for}.",
        ]
    if link:
        body += ["", f"{label}: {link}"]
    body += ["", "You get this because of your notification choices; change them on your settings page."]
    return _one_line(subject)[:200], "\n".join(body) + "\n"


def _one_line(text: str) -> str:
    """A header value on one line: every character Python's e-mail package reads as a line break
    (U+2028 and U+2029 among them, which ``str.splitlines`` honours) and every other control
    character becomes a space. A U+2028 in a run title made every gate e-mail of that run fail."""
    return "".join(
        " " if (ch.isspace() and ch != " ") or ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 else ch for ch in text
    )


slack_escape = _slack_escape  # for runs.notifications.slack_blocks
