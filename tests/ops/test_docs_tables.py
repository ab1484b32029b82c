"""Tables in docs/ that restate the code: generated from it, or held to it (issue 54)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from runs.protocol.integrity import HASHED_KEYS, hash_input
from tests.conftest import REPO


@pytest.mark.slow
def test_generated_tables_are_up_to_date():
    """scripts/docs_tables.py --check: the MCP tool table names every tool the server lists."""
    done = subprocess.run(
        [sys.executable, "scripts/docs_tables.py", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_mcp_table_lists_every_tool_once():
    page = (REPO / "docs/engineers/mcp.md").read_text()
    block = page.split("<!-- generated: mcp-tools -->", 1)[1].split("<!-- /generated: mcp-tools -->", 1)[0]
    names = re.findall(r"^\| `(\w+)` \|", block, re.M)
    assert len(names) == len(set(names)) >= 22


def test_the_hashed_members_table_matches_the_code():
    page = (REPO / "docs/reference/protocol.md").read_text()
    section = page.split("## What the hash covers", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `(\w+)` \| (yes|no)", section, re.M))
    assert {k for k, v in rows.items() if v == "yes"} == {*HASHED_KEYS, "engine"}
    bundle = {k: {} for k in rows} | {"extra": 1}
    assert set(hash_input(bundle)) == {*HASHED_KEYS, "engine"}
