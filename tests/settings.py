"""Settings for the test suite: the project's settings with DEBUG's development defaults (plain
HTTP, no HSTS), unless the environment says otherwise. pytest-django still runs each test with
settings.DEBUG False, as Django's test runner does."""

import os

os.environ.setdefault("DEBUG", "1")
# Background tasks are recorded, never run behind a test's back: tests deliver notifications
# themselves (runs.notifications.tasks.deliver_due); subprocess tests pick their own backend.
os.environ.setdefault("WORKBENCH_TASKS_BACKEND", "dummy")

from django.conf import global_settings  # noqa: E402

from workbench.settings import *  # noqa: E402,F403

# Passwords hashed with few iterations (tests/hashers.py: the same algorithm, so any server process
# a test starts still checks them); Django's default cost is a third of some test files' time.
PASSWORD_HASHERS = ["tests.hashers.QuickPBKDF2PasswordHasher", *global_settings.PASSWORD_HASHERS]

# The OTLP queue's worker is a process of its own: tests that want the queue turn it on themselves.
WORKBENCH_OTLP_QUEUE = False
WORKBENCH_OTLP_WORKER_INPROCESS = False
