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


# What marks a test by what it does (pytest_collection_modifyitems below):
#
# slow        the test, or a fixture it uses, starts a process (daphne, the CLI, node, a worker killed
#             with -9): found by reading their code (tests/markers.py), through the test helpers they
#             call (tests/live/cluster.py's Cluster, tests/browser/support.py ...). The inner loop
#             `pytest -m "not slow and not browser"` leaves them out; `make test` runs them all.
# db_differs  its behaviour differs by database: `make test-postgres` runs these on PostgreSQL (and
#             `make test-sqlite` every test on SQLite). The table is tests/markers.py DB_DIFFERS.
SLOW_WITHOUT_PROCESS = {
    "tests/browser/test_trace_browser.py",  # builds a run of 10,000 spans through the actions
}


def pytest_collection_modifyitems(config, items):
    from tests.lanes import second_lane_files
    from tests.markers import differs_by_database, starts_process

    second_lane = second_lane_files()
    for item in items:
        rel = Path(str(item.fspath)).resolve().relative_to(REPO).as_posix()
        if rel in second_lane:
            item.add_marker(pytest.mark.lane2)
        if rel in SLOW_WITHOUT_PROCESS or starts_process(item):
            item.add_marker(pytest.mark.slow)
        if differs_by_database(item, rel):
            item.add_marker(pytest.mark.db_differs)


@pytest.fixture(scope="session")
def django_db_setup(
    request,
    django_test_environment,
    django_db_blocker,
    django_db_use_migrations,
    django_db_keepdb,
    django_db_createdb,
    django_db_modify_db_settings,
):
    """pytest-django's, except that each worker's database is copied from a migrated template
    (tests/testdb.py) instead of migrated anew, when that applies."""
    from django.test.utils import setup_databases, teardown_databases
    from pytest_django.fixtures import _disable_migrations, _get_databases_for_setup

    from tests import testdb

    verbosity = request.config.option.verbose
    aliases, serialized_aliases = _get_databases_for_setup(request.session.items)
    keepdb = django_db_keepdb and not django_db_createdb
    if not django_db_use_migrations:
        _disable_migrations()
    with django_db_blocker.unblock():
        if django_db_use_migrations and not keepdb and testdb.usable(aliases):
            db_cfg = testdb.setup_from_template(verbosity=verbosity, serialized_aliases=serialized_aliases)
        else:
            db_cfg = setup_databases(
                verbosity=verbosity,
                interactive=False,
                aliases=aliases,
                serialized_aliases=serialized_aliases,
                keepdb=keepdb,
            )
    yield
    if not django_db_keepdb:
        with django_db_blocker.unblock():
            teardown_databases(db_cfg, verbosity=verbosity)
