"""schemathesis against /api/openapi.json, in process (WSGI), with a bounded number of examples.

Every operation gets generated requests (valid and invalid); the API must never answer 5xx, and
every response must match the status codes, content types and schemas the document declares.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from django.test import override_settings
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

# /api/mcp is described in the document but served by the ASGI application only (runs.api.other_doors).
schema = schemathesis.openapi.from_wsgi("/api/openapi.json", get_wsgi_application()).exclude(tag="MCP")
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
EXAMPLE_RUN = "run_example"


@pytest.fixture(autouse=True)
def keep_test_connection():
    """Requests go through the real WSGI handler, whose request signals close the database
    connection; inside the test's transaction that would close it under the test (PostgreSQL).
    Django's own test client detaches the same handler."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def bearer(workspace, workflow):
    from accounts.tokens import create_token
    from runs.actions import do_start_run

    do_start_run(workspace=workspace, workflow=workflow, run_id=EXAMPLE_RUN, actor="test")
    return create_token(workspace=workspace, name="fuzz", scopes=["read", "write", "review", "manage"]).secret


@pytest.mark.django_db
@override_settings(WORKBENCH_RATE_LIMIT_PER_MINUTE=1_000_000, WORKBENCH_RATE_LIMIT_WORKSPACE_PER_MINUTE=0)
@schema.parametrize()
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_api_conforms_to_its_openapi_document(case, bearer):
    if case.path_parameters and "run_id" in case.path_parameters and case.method.upper() == "GET":
        case.path_parameters["run_id"] = EXAMPLE_RUN  # reads of an existing run, not only 404s
    if isinstance(case.query, dict) and "follow" in case.query:
        # a followed transcript tails until its run ends or `wait` seconds pass: no waiting here
        case.query["wait"] = 0
    case.call_and_validate(headers={"Authorization": f"Bearer {bearer}"}, checks=CHECKS)
