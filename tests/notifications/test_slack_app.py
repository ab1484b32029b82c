"""Slack, interactive: a Slack app's gate message (Block Kit through the official slack_sdk,
against a loopback fake of Slack's Web API), signed interaction requests (slack_sdk's
SignatureVerifier on the server; the tests sign as Slack does), member links, and the decision
recorded as a page decision is, with the channel beside it."""

from __future__ import annotations

import base64
import json
import time

import pytest
from django.test import Client

from runs import actions
from runs.actions.signing import do_export_bundle
from runs.actions.slack import do_create_slack_app
from runs.engine import commands as c
from runs.models import Event, GateDecisionMeta, Run, SlackGateMessage, SlackLink
from runs.notifications.delivery import deliver_due
from runs.selectors.runs import run_state
from tests.api.conftest import BearerClient
from tests.budgets.support import pause_at_budget
from tests.fakes.slack_api import CHANNEL, TEAM, FakeSlack, block_action, note_submission, signed
from tests.notifications.conftest import bring_review_gate

pytestmark = pytest.mark.django_db

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TOKEN = "xoxb-test-token"
URL = "/integrations/slack/interactions"


@pytest.fixture
def slack(settings):
    with FakeSlack() as fake:
        settings.WORKBENCH_SLACK_API_URL = fake.api_url
        yield fake


@pytest.fixture
def app(workspace, slack, alice):
    created = do_create_slack_app(
        workspace=workspace, bot_token=TOKEN, signing_secret=SECRET, channel=CHANNEL, actor="user:alice"
    )
    return created.webhook


@pytest.fixture
def posted(workspace, started_run, app, slack):
    """The review gate waits and its message is in Slack: (the message as posted, with its ts)."""
    bring_review_gate(workspace)
    deliver_due()
    (message,) = slack.of("chat.postMessage")
    return {**message, "ts": SlackGateMessage.objects.get().ts}


def _post(body: bytes, headers: dict[str, str]):
    return Client().post(URL, data=body, content_type="application/x-www-form-urlencoded", headers=headers)


def _click(message, action_id, *, user="U0BOB", secret=SECRET, at=None):
    body, headers = signed(secret, block_action(message, action_id, user=user), at=at)
    return _post(body, headers)


def _waiting(workspace) -> bool:
    return bool(run_state(Run.objects.get(run_id="run_n1")).pending_gates())


def _link(workspace, user, slack_user="U0BOB"):
    return SlackLink.objects.create(workspace=workspace, user=user, team_id=TEAM, slack_user_id=slack_user)


def test_the_gate_message_carries_four_buttons_through_the_bot_token(posted, slack):
    assert posted["channel"] == CHANNEL
    (actions_block,) = [b for b in posted["blocks"] if b["type"] == "actions"]
    ids = [e["action_id"] for e in actions_block["elements"]]
    assert ids == ["wb_approve", "wb_reject", "wb_reject_note", "wb_open"]
    assert actions_block["elements"][3]["url"].startswith("https://wb.example/runs/")
    assert slack.tokens[0] == f"Bearer {TOKEN}"


def test_approve_decides_as_the_linked_member_updates_the_message_and_names_slack(
    workspace, posted, slack, bob
):
    _link(workspace, bob)
    answer = _click(posted, "wb_approve")
    assert answer.status_code == 200, answer.content
    assert not _waiting(workspace)
    event = Event.objects.get(type="human_gate_resolved")
    assert event.actor == "user:bob" and event.data["decision"] == "approved"
    assert GateDecisionMeta.objects.get().metadata == {"workbench.channel": "slack"}
    deliver_due()  # gate.resolved: the message updated in place
    (update,) = slack.of("chat.update")
    assert update["ts"] == posted["ts"] and update["channel"] == CHANNEL
    assert "Approved by bob in slack" in update["text"] and "actions" not in [
        b["type"] for b in update["blocks"]
    ]
    export = do_export_bundle(Run.objects.get(run_id="run_n1"), exported_by="user:alice")
    statement = json.loads(base64.b64decode(export.envelope["payload"]))
    (approval,) = statement["predicate"]["approvals"]
    assert (
        approval["by"] == "user:bob" and approval["channel"] == "slack" and approval["decision"] == "approved"
    )


def test_the_thread_hears_when_the_run_completes(workspace, posted, slack, bob):
    _link(workspace, bob)
    _click(posted, "wb_approve")
    actions.do_commands(
        workspace=workspace,
        run_id="run_n1",
        commands=[
            c.BeginStep(step_id="review"),
            c.CompleteStep(step_id="review"),
            c.BeginStep(step_id="publish"),
        ],
        actor="user:alice",
    )
    actions.do_command(
        workspace=workspace, run_id="run_n1", command=c.FailRun(reason="publish broke"), actor="user:alice"
    )
    deliver_due()
    replies = [m for m in slack.of("chat.postMessage") if m.get("thread_ts")]
    assert [r["thread_ts"] for r in replies] == [posted["ts"]]
    assert "Run failed" in replies[0]["text"]


@pytest.mark.parametrize(
    ("how", "status", "code"),
    [
        ("forged", 401, "SLACK_SIGNATURE_INVALID"),
        ("stale", 401, "SLACK_STALE_REQUEST"),
        ("unsigned", 401, "SLACK_SIGNATURE_MISSING"),
    ],
)
def test_a_request_not_from_the_app_decides_nothing(workspace, posted, bob, how, status, code):
    _link(workspace, bob)
    if how == "forged":
        answer = _click(posted, "wb_approve", secret="not-the-signing-secret")
    elif how == "stale":
        answer = _click(posted, "wb_approve", at=int(time.time()) - 6 * 60)
    else:
        body, _ = signed(SECRET, block_action(posted, "wb_approve", user="U0BOB"))
        answer = _post(body, {})
    assert answer.status_code == status and answer.json()["code"] == code
    assert _waiting(workspace) and not Event.objects.filter(type="human_gate_resolved").exists()


def test_a_replay_is_refused_and_decides_nothing(workspace, posted, slack, bob):
    body, headers = signed(SECRET, block_action(posted, "wb_approve", user="U0BOB"))
    first = _post(body, headers)  # Bob is not linked yet: refused, nothing decided
    assert first.status_code == 200 and first.json()["code"] == "SLACK_USER_NOT_LINKED"
    _link(workspace, bob)
    again = _post(body, headers)  # the same request once more: now Bob could decide, but it is a replay
    assert again.status_code == 409 and again.json()["code"] == "SLACK_REPLAYED"
    assert _waiting(workspace)


def test_an_unlinked_user_is_told_ephemerally_and_links_through_the_signed_link(
    workspace, posted, slack, bob
):
    answer = _click(posted, "wb_approve", user="U0NEW")
    assert answer.json()["code"] == "SLACK_USER_NOT_LINKED" and _waiting(workspace)
    (told,) = slack.of("chat.postEphemeral")
    assert told["user"] == "U0NEW" and told["channel"] == CHANNEL
    link = told["text"].split("): ", 1)[1].split()[0].rstrip(".")
    path = link.removeprefix("https://wb.example")
    browser = Client()
    browser.force_login(bob)
    page = browser.get(path)
    assert page.status_code == 200 and b"U0NEW" in page.content
    assert not SlackLink.objects.exists()  # opening the link links nothing
    token = path.split("?t=", 1)[1]
    done = browser.post("/settings/slack/link/", {"t": token})
    assert done.status_code == 302
    assert SlackLink.objects.get().user == bob
    reused = browser.post("/settings/slack/link/", {"t": token})
    assert reused.status_code == 400 and b"already used" in reused.content
    assert _click(posted, "wb_approve", user="U0NEW", at=int(time.time()) - 1).status_code == 200
    assert Event.objects.get(type="human_gate_resolved").actor == "user:bob"
    listing = browser.get("/settings/slack/")
    assert b"U0NEW" in listing.content
    browser.post("/settings/slack/", {"link": str(SlackLink.objects.get().pk)})
    assert not SlackLink.objects.exists()


def test_a_link_for_another_workspace_or_forged_links_nothing(workspace, posted, slack, charlie):
    _click(posted, "wb_approve", user="U0NEW")
    path = (
        slack.of("chat.postEphemeral")[0]["text"]
        .split("): ", 1)[1]
        .split()[0]
        .removeprefix("https://wb.example")
    )
    browser = Client()
    browser.force_login(charlie)  # a member of another workspace only
    assert browser.get(path).status_code == 404
    assert browser.post("/settings/slack/link/", {"t": path.split("?t=", 1)[1]}).status_code == 404
    assert browser.post("/settings/slack/link/", {"t": "forged:token"}).status_code == 400
    assert not SlackLink.objects.exists()


def test_a_member_who_may_not_review_is_refused(workspace, posted, slack, vera):
    _link(workspace, vera, "U0VERA")
    answer = _click(posted, "wb_approve", user="U0VERA")
    assert answer.json()["code"] == "FORBIDDEN" and _waiting(workspace)
    assert "may not decide gates" in slack.of("chat.postEphemeral")[0]["text"]


def test_reject_with_a_note_opens_a_modal_and_its_submission_decides(workspace, posted, slack, bob):
    _link(workspace, bob)
    assert _click(posted, "wb_reject_note").status_code == 200
    (opened,) = slack.of("views.open")
    assert opened["view"]["callback_id"] == "wb_reject_note_modal" and _waiting(workspace)
    body, headers = signed(
        SECRET, note_submission(opened["view"]["private_metadata"], "too harsh", user="U0BOB")
    )
    assert _post(body, headers).status_code == 200
    event = Event.objects.get(type="human_gate_resolved")
    assert (event.actor, event.data["decision"], event.data.get("note")) == (
        "user:bob",
        "rejected",
        "too harsh",
    )


def test_a_second_decision_is_refused_ephemerally(workspace, posted, slack, bob, alice):
    _link(workspace, bob)
    _link(workspace, alice, "U0ALICE")
    _click(posted, "wb_approve")
    answer = _click(posted, "wb_reject", user="U0ALICE")
    assert answer.status_code == 200 and answer.json()["code"] == "INVALID_STATE_TRANSITION"
    assert Event.objects.filter(type="human_gate_resolved").count() == 1


def test_email_matching_when_the_owner_allows_it(workspace, posted, slack, app, bob):
    bob.email = "bob@acme.example"
    bob.save()
    slack.emails["U0MAIL"] = "BOB@acme.example"
    assert _click(posted, "wb_approve", user="U0MAIL").json()["code"] == "SLACK_USER_NOT_LINKED"
    app.slack_app.email_match = True
    app.slack_app.save()
    # (a second earlier: the same request in the same second would be a replay)
    answer = _click(posted, "wb_approve", user="U0MAIL", at=int(time.time()) - 1)
    assert answer.status_code == 200 and answer.json() == {"ok": True}, (answer.json(), slack.calls)
    assert Event.objects.get(type="human_gate_resolved").actor == "user:bob"


def test_rest_create_list_change_delete(workspace, other_workspace, slack):
    from accounts.tokens import create_token

    api = BearerClient(create_token(workspace=workspace, name="m", scopes=["read", "manage"]).secret)
    made = api.post("/api/slack/apps", {"botToken": TOKEN, "signingSecret": SECRET, "channel": CHANNEL})
    assert made.status_code == 201, made.content
    body = made.json()
    assert "botToken" not in body and "signingSecret" not in body and SECRET not in made.content.decode()
    assert body["channel"] == CHANNEL and "gate.resolved" in body["events"]
    assert [a["id"] for a in api.get("/api/slack/apps").json()] == [body["id"]]
    changed = api.send("PATCH", f"/api/slack/apps/{body['id']}", {"channel": "C0OTHER", "emailMatch": True})
    assert (
        changed.status_code == 200 and changed.json()["channel"] == "C0OTHER" and changed.json()["emailMatch"]
    )
    bad = api.post("/api/slack/apps", {"botToken": "", "signingSecret": SECRET, "channel": CHANNEL})
    assert bad.status_code == 400 and bad.json()["code"] == "INVALID_INPUT"
    outsider = BearerClient(
        create_token(workspace=other_workspace, name="o", scopes=["read", "manage"]).secret
    )
    assert outsider.get(f"/api/slack/apps/{body['id']}").status_code == 404
    assert outsider.send("DELETE", f"/api/slack/apps/{body['id']}").status_code == 404
    assert api.send("DELETE", f"/api/slack/apps/{body['id']}").status_code == 204
    assert api.get(f"/api/slack/apps/{body['id']}").status_code == 404


def test_a_reader_token_may_not_manage_slack_apps(workspace, slack):
    from accounts.tokens import create_token

    api = BearerClient(create_token(workspace=workspace, name="r", scopes=["read"]).secret)
    assert (
        api.post(
            "/api/slack/apps", {"botToken": TOKEN, "signingSecret": SECRET, "channel": CHANNEL}
        ).status_code
        == 403
    )


def test_a_budget_gate_message_stops_the_run_and_an_approve_click_is_refused(workspace, app, slack, bob):
    """A run's ``budget`` gate: no Approve in its message (it goes on only with a new budget);
    an Approve click of an older message is refused with BUDGET_LIMIT_REQUIRED, Stop stops it."""
    pause_at_budget(workspace, "run_n1")
    deliver_due()
    (message,) = slack.of("chat.postMessage")
    posted = {**message, "ts": SlackGateMessage.objects.get().ts}
    (buttons,) = [b["elements"] for b in posted["blocks"] if b["type"] == "actions"]
    assert [b["action_id"] for b in buttons] == ["wb_reject", "wb_open"]
    _link(workspace, bob)
    older = {"blocks": [{"type": "actions", "elements": [{**buttons[0], "action_id": "wb_approve"}]}]}
    refused = _click(older, "wb_approve")
    assert refused.json()["code"] == "BUDGET_LIMIT_REQUIRED" and _waiting(workspace)
    assert not Event.objects.filter(type="human_gate_resolved").exists()
    assert _click(posted, "wb_reject").status_code == 200
    event = Event.objects.get(type="human_gate_resolved")
    assert event.data["decision"] == "rejected" and event.data["note"] == "Stopped at its budget by user:bob"
    assert GateDecisionMeta.objects.get().metadata == {"workbench.channel": "slack"}
