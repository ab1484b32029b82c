"""Bounded query counts per page: they do not grow with the number of events or runs."""

from __future__ import annotations

import pytest

from tests.pages.conftest import login

pytestmark = pytest.mark.django_db


def _grow(run, workspace, n):
    from runs import actions
    from runs.engine import commands as c

    actions.do_commands(
        workspace=workspace,
        run_id=run.run_id,
        commands=[
            c.LogModelIO(direction="stream_chunk", correlation_id=f"s{i // 20}", payload="x")
            if i % 3
            else c.Annotate(text=f"n{i}")
            for i in range(n)
        ],
        actor="user:alice",
    )
    run.refresh_from_db()


def test_run_detail_queries_are_bounded(client, alice, run, workspace, django_assert_max_num_queries):
    login(client, alice)
    client.get(f"/runs/{run.run_id}/")  # session and membership warm-up is part of the budget anyway
    # 18: the page's reads, plus one each for the pending-gate and pending-promotion counts in the
    # navigation, one index probe for spans (no span waterfall without them), two for the
    # attempt numbers of the steps on the timeline's page and one for the waiting gate's policy
    # (the workspace's gate policies: runs.selectors.gatepolicy)
    with django_assert_max_num_queries(18):
        assert client.get(f"/runs/{run.run_id}/").status_code == 200
    _grow(run, workspace, 600)
    with django_assert_max_num_queries(18):
        assert client.get(f"/runs/{run.run_id}/").status_code == 200
    with django_assert_max_num_queries(8):
        assert (
            client.get(f"/runs/{run.run_id}/timeline/?after=300", HTTP_HX_REQUEST="true").status_code == 200
        )
    with django_assert_max_num_queries(8):
        assert (
            client.get(f"/runs/{run.run_id}/timeline/?after=300", HTTP_HX_REQUEST="true").status_code == 200
        )
    with django_assert_max_num_queries(8):
        assert (
            client.get(
                f"/runs/{run.run_id}/timeline/?type=annotation&q=n5", HTTP_HX_REQUEST="true"
            ).status_code
            == 200
        )


def test_list_and_inbox_queries_do_not_grow_with_runs(client, alice, make_run, django_assert_max_num_queries):
    login(client, alice)
    for i in range(12):
        make_run(f"run_q_{i}")
    client.get("/runs/")  # the first request stores the chosen workspace in the session
    with django_assert_max_num_queries(9):  # + the navigation's pending-gate and promotion counts
        assert client.get("/runs/").status_code == 200
    with django_assert_max_num_queries(11):  # + "Decided recently": the newest runs, their decisions
        assert client.get("/runs/inbox/").status_code == 200
    with django_assert_max_num_queries(11):
        assert client.get("/ledger/").status_code == 200


def test_event_state_queries_are_bounded(client, alice, run, workspace, django_assert_max_num_queries):
    _grow(run, workspace, 300)
    login(client, alice)
    client.get("/runs/")
    with django_assert_max_num_queries(14):
        assert client.get(f"/runs/{run.run_id}/events/250/", HTTP_HX_REQUEST="true").status_code == 200
