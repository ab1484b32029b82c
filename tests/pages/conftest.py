"""Fixtures for page tests: runs built through the actions (the one write path)."""

from __future__ import annotations

import pytest

XSS = '<script>alert("x")</script>'
ATTR = '" onmouseover="alert(1)" x="'
JS_URL = "javascript:alert(1)"


def _cmd():
    from runs.engine import commands

    return commands


@pytest.fixture
def make_run(workspace, workflow):
    """Start a run and drive it to the parse step's end: one model call, one artifact; review waits."""
    from runs import actions

    def make(
        run_id: str = "run_pages_1",
        *,
        ws=None,
        tags=("nightly",),
        subject=None,
        metadata=None,
        finish_parse=True,
    ):
        c = _cmd()
        ws = ws or workspace
        actions.do_start_run(
            workspace=ws,
            workflow=workflow,
            actor="user:alice",
            run_id=run_id,
            subject=subject or {"userId": "u-1", "tenantId": "t-1", "planId": "pro"},
            metadata=metadata or {"source": "tests"},
            tags=list(tags),
        )

        def do(command):
            return actions.do_command(workspace=ws, run_id=run_id, command=command, actor="user:alice")

        do(c.BeginStep(step_id="parse"))
        do(
            c.LogModelIO(
                direction="request",
                provider="anthropic",
                model="claude-haiku",
                step_id="parse",
                correlation_id="call-1",
            )
        )
        do(
            c.LogModelIO(
                direction="response",
                provider="anthropic",
                model="claude-haiku",
                usage={"inputTokens": 120, "outputTokens": 40},
                cost={"amount": 0.0021, "currency": "usd"},
                duration_ms=350,
                step_id="parse",
                correlation_id="call-1",
            )
        )
        do(c.WriteArtifact(key="notes", type_id="json.notes", data={"title": "first", "items": [1, 2]}))
        if finish_parse:
            do(c.CompleteStep(step_id="parse"))
        from runs.models import Run

        return Run.objects.get(run_id=run_id)

    return make


@pytest.fixture
def run(make_run):
    return make_run()


@pytest.fixture
def hostile_run(workspace, workflow):
    """A run whose trace carries markup, attribute breakers, javascript: URLs, huge and deep values."""
    from runs import actions

    c = _cmd()
    deep: dict = {"leaf": XSS}
    for _ in range(200):
        deep = {"d": deep}
    actions.do_start_run(
        workspace=workspace,
        workflow=workflow,
        actor="user:alice",
        run_id="run_hostile",
        subject={"userId": XSS},
        metadata={"link": JS_URL, XSS: ATTR},
        tags=[XSS, ATTR],
    )

    def do(command):
        actions.do_command(workspace=workspace, run_id="run_hostile", command=command, actor="user:alice")

    do(c.BeginStep(step_id="parse"))
    do(
        c.LogToolCall(
            name=XSS,
            args={"url": JS_URL, "attr": ATTR},
            result="x" * 300_000,
            step_id="parse",
            correlation_id=ATTR,
        )
    )
    do(c.Annotate(text=XSS, tags=[ATTR]))
    do(
        c.LogModelIO(
            direction="response", provider=XSS, model=ATTR, summary=XSS, payload=deep, step_id="parse"
        )
    )
    do(c.WriteArtifact(key="evil", type_id="json.evil", data={"html": XSS, "href": JS_URL, "deep": deep}))
    do(c.RecordError(message=XSS, code=ATTR))
    from runs.models import Run

    return Run.objects.get(run_id="run_hostile")


def login(client, user):
    client.force_login(user)
    return client
