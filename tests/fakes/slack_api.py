"""A loopback fake of Slack's Web API for the official ``slack_sdk`` client: it records every call
(method, bot token, JSON arguments) and answers as Slack does (``{"ok": true, ...}``), plus the
helpers a test needs to be Slack on the other side: signed interaction requests.

``with FakeSlack() as slack: slack.api_url`` -> http://127.0.0.1:<port>/api/ (a WebClient's
``base_url``). ``slack.emails`` maps Slack user ids to the e-mail ``users.info`` answers.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from urllib.parse import parse_qs, urlencode, urlsplit

from slack_sdk.signature import SignatureVerifier

from tests.fakes.loopback import LoopbackServer, Received, Reply

CHANNEL = "C0GATES"
_TRIGGERS = itertools.count(1)  # every click its own trigger_id, as Slack's are (no two requests alike)
TEAM = "T0TEAM"


class FakeSlack:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []  # (method, arguments)
        self.tokens: list[str] = []
        self.emails: dict[str, str] = {}
        self.fail: dict[str, str] = {}  # method -> the error Slack answers with (ok: false)
        self._ts = itertools.count(1)
        self._changed = threading.Condition()
        self._server = LoopbackServer(self._answer)

    @property
    def api_url(self) -> str:
        return self._server.url + "/api/"

    def _answer(self, req: Received) -> Reply:
        parts = urlsplit(req.path)
        method = parts.path.rsplit("/", 1)[-1]
        args = dict(req.json or {})
        if req.json is None and req.raw:  # form-encoded arguments (users.info and the like)
            args.update({k: v[0] for k, v in parse_qs(req.raw.decode()).items()})
        args.update({k: v[0] for k, v in parse_qs(parts.query).items()})
        with self._changed:
            self.calls.append((method, args))
            self.tokens.append(req.headers.get("authorization", ""))
            self._changed.notify_all()
        if method in self.fail:
            return Reply(200, {"ok": False, "error": self.fail[method]})
        if method == "chat.postMessage":
            ts = f"1700000000.{next(self._ts):06d}"
            return Reply(200, {"ok": True, "channel": args.get("channel"), "ts": ts, "message": {"ts": ts}})
        if method == "chat.update":
            return Reply(200, {"ok": True, "channel": args.get("channel"), "ts": args.get("ts")})
        if method == "chat.postEphemeral":
            return Reply(200, {"ok": True, "message_ts": "1700000000.999999"})
        if method == "views.open":
            return Reply(200, {"ok": True, "view": {"id": "V0MODAL"}})
        if method == "users.info":
            email = self.emails.get(str(args.get("user")))
            profile = {"email": email} if email else {}
            return Reply(200, {"ok": True, "user": {"id": args.get("user"), "profile": profile}})
        return Reply(200, {"ok": False, "error": "unknown_method"})

    def of(self, method: str) -> list[dict]:
        return [args for name, args in self.calls if name == method]

    def wait_for(self, method: str, count: int = 1, timeout: float = 10.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self.of(method)) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"Slack got {len(self.of(method))} {method} call(s), wanted {count}: {self.calls}"
                    )
                self._changed.wait(left)
        return self.of(method)

    def __enter__(self) -> FakeSlack:
        self._server.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.stop()


def signed(secret: str, payload: dict, *, at: int | None = None) -> tuple[bytes, dict[str, str]]:
    """An interaction request as Slack sends it: ``payload=<json>`` form-encoded, signed v0."""
    body = urlencode({"payload": json.dumps(payload)}).encode()
    timestamp = str(at if at is not None else int(time.time()))
    signature = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=body)
    return body, {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": signature or ""}


def block_action(message: dict, action_id: str, *, user: str, team: str = TEAM) -> dict:
    """The ``block_actions`` payload of a click on one button of a posted gate message."""
    button = next(
        e
        for block in message["blocks"]
        if block["type"] == "actions"
        for e in block["elements"]
        if e["action_id"] == action_id
    )
    return {
        "type": "block_actions",
        "team": {"id": team},
        "user": {"id": user, "team_id": team},
        "channel": {"id": message.get("channel", CHANNEL)},
        "container": {"type": "message", "channel_id": message.get("channel", CHANNEL)},
        "trigger_id": f"1234.{next(_TRIGGERS)}.trigger",
        "response_url": "https://hooks.slack.invalid/actions/1",
        "actions": [
            {"action_id": action_id, "block_id": "wb_gate", "value": button["value"], "type": "button"}
        ],
    }


def note_submission(value: str, note: str, *, user: str, team: str = TEAM) -> dict:
    """The ``view_submission`` payload of the "Reject with a note" modal."""
    return {
        "type": "view_submission",
        "team": {"id": team},
        "user": {"id": user, "team_id": team},
        "view": {
            "callback_id": "wb_reject_note_modal",
            "private_metadata": value,
            "state": {"values": {"note": {"note": {"type": "plain_text_input", "value": note}}}},
        },
    }
