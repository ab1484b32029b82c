"""Shared fixtures: a workspace with alice (owner), bob (reviewer), vera (viewer); charlie is an outsider."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _find_conformance() -> Path:
    """The reference's conformance corpus: $WORKBENCH_CONFORMANCE_DIR, else ../shared/conformance
    beside the checkout, else the shared folder of this workplace (CI clones elsewhere)."""
    if os.environ.get("WORKBENCH_CONFORMANCE_DIR"):
        return Path(os.environ["WORKBENCH_CONFORMANCE_DIR"])
    for candidate in (REPO.parent / "shared" / "conformance", Path("/work/shared/conformance")):
        if candidate.is_dir():
            return candidate
    return REPO.parent / "shared" / "conformance"


CONFORMANCE = _find_conformance()


@pytest.fixture
def conformance_dir() -> Path:
    if not CONFORMANCE.is_dir():
        pytest.skip(f"conformance corpus not found at {CONFORMANCE}")
    return CONFORMANCE


@pytest.fixture(autouse=True)
def _fresh_rate_limits(settings):
    """Each test counts rate limits (API, playground sends, failed sign-ins) in its own key space
    (no cache flush: the cache may be a shared Redis)."""
    settings.WORKBENCH_RATE_LIMIT_KEY_PREFIX = f"wb:rl:test:{uuid.uuid4().hex}"


@pytest.fixture
def workspace(db):
    from runs.models import Workspace

    return Workspace.objects.create(slug="acme", name="Acme")


@pytest.fixture
def other_workspace(db):
    from runs.models import Workspace

    return Workspace.objects.create(slug="globex", name="Globex")


def _member(django_user_model, workspace, name: str, role: str):
    """A user `name` (password `<name>-password-123`) with `role` in `workspace`."""
    from runs.actions.workspaces import add_member

    user = django_user_model.objects.create_user(username=name, password=f"{name}-password-123")
    add_member(workspace, user, role)
    return user


@pytest.fixture
def alice(db, django_user_model, workspace):
    return _member(django_user_model, workspace, "alice", "owner")


@pytest.fixture
def bob(db, django_user_model, workspace):
    return _member(django_user_model, workspace, "bob", "reviewer")


@pytest.fixture
def vera(db, django_user_model, workspace):
    return _member(django_user_model, workspace, "vera", "viewer")


@pytest.fixture
def charlie(db, django_user_model, other_workspace):
    return _member(django_user_model, other_workspace, "charlie", "owner")


LINEAR_WORKFLOW = {
    "id": "wf-demo",
    "version": 1,
    "title": "Parse, review, publish",
    "steps": [
        {"id": "parse", "gatePolicy": "AUTO"},
        {"id": "review", "gatePolicy": "PAUSE_BEFORE"},
        {"id": "publish", "gatePolicy": "PAUSE_AFTER"},
    ],
    "edges": [{"id": "e1", "from": "parse", "to": "review"}, {"id": "e2", "from": "review", "to": "publish"}],
}


@pytest.fixture
def workflow() -> dict:
    import copy

    return copy.deepcopy(LINEAR_WORKFLOW)


@pytest.fixture(autouse=True)
def _private_transcript_dir(settings, tmp_path_factory):
    """Live transcript files (runs.telemetry.transcript_log) go to a directory of this test alone."""
    settings.WORKBENCH_TRANSCRIPT_DIR = tmp_path_factory.mktemp("transcripts")


@pytest.fixture(autouse=True)
def _private_signing_keys(settings, tmp_path_factory):
    """Signing keys (runs.actions.signing) are created in a directory of this test alone, never var/."""
    settings.WORKBENCH_SIGNING_KEY_DIR = tmp_path_factory.mktemp("signing")
    settings.WORKBENCH_SIGNING_KEY = ""


# Test files that start processes (daphne, the CLI, node, a worker killed with -9): the inner loop
# `pytest -m "not slow and not browser"` leaves them out; `make test` runs them all.
SLOW_FILES = {
    "tests/api/test_ratelimit_shared.py",
    "tests/api/test_run_id_urls.py",
    "tests/live/test_ingress_live.py",
    "tests/live/test_big_bundle_live.py",
    "tests/live/test_multiprocess.py",
    "tests/mcp/test_endpoint_loops.py",
    "tests/mcp/test_mcp_server.py",
    "tests/ops/test_body_limit.py",
    "tests/ops/test_request_limits.py",
    "tests/ops/test_daphne_shutdown.py",
    "tests/ops/test_deploy.py",
    "tests/ops/test_startup.py",
    "tests/protocol/test_signing.py",
    "tests/protocol/test_verify_cli.py",
    "tests/security/test_kill9_durability.py",
    "tests/storage/test_verify_cli.py",
    "tests/ops/test_sdk_standalone.py",
    "tests/notifications/test_kill9_delivery.py",
    "tests/browser/test_notifications_browser.py",
    "tests/browser/test_trace_browser.py",  # builds a run of 10,000 spans through the actions
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        rel = Path(str(item.fspath)).resolve().relative_to(REPO).as_posix()
        if rel in SLOW_FILES:
            item.add_marker(pytest.mark.slow)
