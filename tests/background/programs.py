"""Step code for worker processes started by the slow tests: ``WORKBENCH_PROGRAM_MODULES``
names this module, and ``WORKBENCH_TEST_FAKE_URL`` the loopback provider fake the test counts
requests at (tests/replay/test_replay.py's pipeline: draft, a reviewed gate, publish)."""

from __future__ import annotations

import os

from runs.engine import programs
from tests.replay.test_replay import WORKFLOW, Pipeline

if os.environ.get("WORKBENCH_TEST_FAKE_URL"):
    programs.register(WORKFLOW["id"], Pipeline(os.environ["WORKBENCH_TEST_FAKE_URL"]))
