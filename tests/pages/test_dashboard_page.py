"""The monitoring dashboard page: the demo workspace's charts all drawn, filters in the URL,
bad input answered with a code, another workspace's numbers never shown."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from runs.demo.job_search import build_demo
from runs.demo.public import import_batch

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(workspace):
    runs = build_demo(workspace)
    runs.append(import_batch(workspace))
    return runs


def _range(demo) -> dict[str, str]:
    days = [run.started_at.date() for run in demo]
    return {"from": min(days).isoformat(), "to": max(days).isoformat()}


def test_dashboard_path_is_the_shells_link():
    assert reverse("runs:dashboard") == "/dashboard/"


def test_every_chart_of_the_demo_workspace_is_drawn(client, alice, demo):
    client.force_login(alice)
    response = client.get(reverse("runs:dashboard"), _range(demo))
    assert response.status_code == 200
    html = response.content.decode()
    charts = re.findall(r'data-chart="([a-z0-9-]+)"', html)
    assert charts == [
        "runs",
        "errors",
        "run-latency",
        "model-latency",
        "model-p95",
        "cost",
        "tokens",
        "decision-time",
        "rejections",
        "reviewers",
    ]
    assert "data-chart-empty" not in html
    # every mark has its value on hover and takes keyboard focus; one tab stop per chart (the
    # first mark: static/workbench/charts.js moves it with the arrow keys)
    marks = re.findall(
        r'<g class="mark" tabindex="(0|-1)" role="img" aria-label="([^"]+)"><title>([^<]+)</title>', html
    )
    assert marks and all(label == title for _, label, title in marks)
    charts = html.count("data-chart-marks")
    assert charts == 10 and [stop for stop, _, _ in marks].count("0") == charts
    assert (
        "workbench/charts.js" in html and html.count('data-chart-value aria-hidden="true" hidden') == charts
    )
    assert html.count("(data table)") >= 10
    assert str(len(demo)) in re.search(r"Runs<span class=\"value\">([^<]+)<", html).group(1)


def test_filters_narrow_the_numbers_and_stay_in_the_url(client, alice, demo):
    client.force_login(alice)
    params = _range(demo)
    everything = client.get(reverse("runs:dashboard"), params).content.decode()
    assert 'value="job-search"' in everything or "job" in everything
    models = re.findall(
        r'<option value="([^"]+)">', everything.split('id="d-model"')[1].split("</select>")[0]
    )
    assert models
    one = client.get(reverse("runs:dashboard"), {**params, "model": models[0]}).content.decode()
    assert f'<option value="{models[0]}" selected>' in one
    nothing = client.get(
        reverse("runs:dashboard"), {**params, "workflow": "no-such-workflow"}
    ).content.decode()
    assert re.search(r"Runs<span class=\"value\">0<", nothing)
    assert nothing.count("data-chart-empty") == 10


def test_bad_dates_answer_with_a_code(client, alice, demo):
    client.force_login(alice)
    response = client.get(reverse("runs:dashboard"), {"from": "yesterday"})
    assert response.status_code == 400
    assert "INVALID_DATE" in response.content.decode()
    today = timezone.now().date()
    long = client.get(reverse("runs:dashboard"), {"from": (today - timedelta(days=4000)).isoformat()})
    assert long.status_code == 400 and "RANGE_TOO_LONG" in long.content.decode()


def test_an_outsider_sees_only_their_own_workspace(client, charlie, demo):
    client.force_login(charlie)
    html = client.get(reverse("runs:dashboard"), _range(demo)).content.decode()
    assert re.search(r"Runs<span class=\"value\">0<", html)
    assert html.count("data-chart-empty") == 10


def test_anonymous_is_sent_to_sign_in(client):
    response = client.get(reverse("runs:dashboard"))
    assert response.status_code == 302 and "/login" in response["Location"]
