"""`manage.py otel_export` sends a stored run's spans to an OTLP collector on loopback."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from runs.execution.host import Workbench
from tests.telemetry.test_otel_export import collector  # noqa: F401 (fixture)


@pytest.mark.django_db
def test_export_stored_run(collector, workflow):  # noqa: F811
    session = Workbench(workspace="otel").start_run(workflow=workflow)
    session.begin_step("parse")
    session.start_span("s1", "parse document")
    session.log_model_io(
        direction="response",
        provider="openai",
        model="gpt-4.1-mini",
        usage={"inputTokens": 3, "outputTokens": 2},
    )
    session.log_tool_call("lookup", args={"q": "x"}, result={"ok": True})
    session.end_span("s1", status="ok")
    out = StringIO()
    call_command("otel_export", session.run_id, "--endpoint", collector.url, "--header", "x-k=v", stdout=out)
    names = sorted(span.name for span in collector.spans())
    assert names == ["gen_ai.chat gpt-4.1-mini", "gen_ai.tool lookup", "parse document", "step parse"]
    assert "exported 4 spans" in out.getvalue()
    with pytest.raises(CommandError, match="UNKNOWN_RUN"):
        call_command("otel_export", "nope", "--endpoint", collector.url)


@pytest.fixture(autouse=True)
def _operator_allows_the_loopback_collector(settings):
    # The collector fake listens on loopback; outside the embedded profile (PostgreSQL runs) the
    # operator's own OTLP destination reaches loopback only with the allowance.
    settings.WORKBENCH_EGRESS_ALLOW = ["127.0.0.0/8", "::1/128"]
