"""Times through one helper (issue 52): every moment these pages show is the ``when`` filter's
``<time datetime title data-rel>`` ("3 min ago", the exact moment on hover), not ``timesince``
nor a raw ``Y-m-d H:i`` date: the runs list (started, ended), a judge's suspension, the budget
trail, the Slack links and a backed-off webhook."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from judges import actions as judge_actions
from judges.models import GateJudge
from runs.actions.permissions import ROLE_SCOPES
from runs.actions.prompts import do_save_prompt_version
from runs.actions.runs import do_cancel_tree
from runs.models_budgets import BudgetRecord
from runs.models_notify import Webhook
from runs.models_slack import SlackLink
from runs.presenters import times
from tests.pages.conftest import login

pytestmark = pytest.mark.django_db

# what the when filter writes: <time datetime="…Z" title="… UTC" data-rel>words</time>
TIME = re.compile(r'<time datetime="(\d{4}-\d\d-\d\dT[\d:.]+Z)" title="([^"]+ UTC)" data-rel>([^<]+)</time>')


def moments(html: str) -> list[tuple[str, str, str]]:
    return TIME.findall(html)


def raw_dates(html: str) -> list[str]:
    """A date and time written out in the page's text (not in an attribute): what `when` replaces."""
    text = re.sub(r"<[^>]+>", " ", html)
    return re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d", text)


def test_run_list_started_and_ended(client, alice, make_run, workspace):
    make_run("run_t1")
    do_cancel_tree(workspace=workspace, run_id="run_t1", actor="user:alice", reason="done")
    login(client, alice)
    html = client.get("/runs/").content.decode()
    row = html[html.index('value="run_t1"') :]
    row = row[: row.index("</tr>")]
    found = moments(row)
    assert len(found) == 2, row  # started and ended
    assert [words for _, _, words in found] == ["just now", "just now"]
    assert " ago</time>" not in row and "timesince" not in row and raw_dates(row) == []


def test_judge_suspension(client, alice, workspace):
    do_save_prompt_version(workspace, name="j", body="{{run}}", scopes=ROLE_SCOPES["owner"], user=alice)
    judge = judge_actions.do_create_judge(
        workspace=workspace,
        name="reviewer",
        kind="llm",
        workflow_id="wf-demo",
        step_id="review",
        gate="PAUSE_BEFORE",
        config={"provider": "anthropic", "model": "m", "prompt": "j", "promptVersion": 1},
        actor="user:alice",
    )
    at = timezone.now() - timedelta(hours=3)
    GateJudge.objects.filter(pk=judge.pk).update(suspended_at=at, suspended_reason="kappa fell to 0.41")
    login(client, alice)
    html = client.get(f"/judges/{judge.judge_id}/").content.decode()
    said = re.search(r'<p class="field-error" role="status" id="suspended">(.*?)</p>', html).group(1)
    assert moments(said) == [(times.iso(at), times.absolute(at), "3 h ago")]
    assert "kappa fell to 0.41" in said and raw_dates(said) == []


def test_budget_trail(client, alice, workspace):
    at = timezone.now() - timedelta(days=2)
    BudgetRecord.objects.create(
        workspace=workspace, kind="paused", actor="user:alice", message="paused", at=at
    )
    login(client, alice)
    html = client.get("/settings/budgets/").content.decode()
    trail = html[html.index('id="budget-trail"') :]
    trail = trail[: trail.index("</table>")]
    assert moments(trail) == [(times.iso(at), times.absolute(at), "2 days ago")]
    assert "(UTC)" not in trail and raw_dates(trail) == []


def test_slack_links(client, alice, workspace):
    link = SlackLink.objects.create(workspace=workspace, user=alice, team_id="T1", slack_user_id="U1")
    login(client, alice)
    html = client.get("/settings/slack/").content.decode()
    table = html[html.index("<tbody") : html.index("</tbody>")]
    assert moments(table) == [(times.iso(link.created_at), times.absolute(link.created_at), "just now")]
    assert raw_dates(table) == []


def test_backed_off_webhook(client, alice, workspace):
    until = timezone.now() + timedelta(minutes=10, seconds=20)
    Webhook.objects.create(
        public_id="wh_times",
        workspace=workspace,
        url="https://hooks.example.com/x",
        events=["gate.requested"],
        secret="s" * 32,
        consecutive_failures=5,
        last_failure="timed out",
        backoff_until=until,
        backoffs=1,
    )
    login(client, alice)
    html = client.get("/settings/webhooks/").content.decode()
    said = re.search(r'data-breaker="open">(.*?)</p>', html).group(1)
    assert said.startswith("Backed off (next try <time")
    assert moments(said) == [(times.iso(until), times.absolute(until), "in 10 min")]
    assert raw_dates(said) == [] and not re.search(r">\d\d:\d\d<", said)
