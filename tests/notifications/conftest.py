"""Notification fixtures: loopback receivers allowed by the egress guard, hooks, people with e-mail."""

from __future__ import annotations

import pytest

LOOPBACK = ["127.0.0.0/8", "::1/128"]


@pytest.fixture(autouse=True)
def _loopback_receivers(settings):
    """The receivers of these tests listen on 127.0.0.1: the operator allowance lets them in."""
    settings.WORKBENCH_EGRESS_ALLOW = LOOPBACK
    settings.WORKBENCH_SITE_URL = "https://wb.example"


@pytest.fixture
def receiver():
    from tests.fakes.webhook_receiver import Receiver

    with Receiver() as rx:
        yield rx


@pytest.fixture
def started_run(workspace, workflow, alice):
    from runs import actions

    return actions.do_start_run(workspace=workspace, workflow=workflow, run_id="run_n1", actor="user:alice")


def make_hook(workspace, url, events=("gate.requested",), kind="webhook"):
    from runs.actions.webhooks import do_create_webhook

    return do_create_webhook(workspace=workspace, url=url, events=list(events), kind=kind, actor="user:alice")


def bring_review_gate(workspace, run_id="run_n1", actor="user:alice"):
    """parse runs and completes: the review step (PAUSE_BEFORE) starts waiting at its gate."""
    from runs import actions
    from runs.engine import commands as c

    return actions.do_commands(
        workspace=workspace,
        run_id=run_id,
        commands=[c.BeginStep(step_id="parse"), c.CompleteStep(step_id="parse")],
        actor=actor,
    )
