"""Tables in docs/ generated from the code, so they cannot drift from it (issue 54).

    .venv/bin/python scripts/docs_tables.py          # rewrite the tables in place
    .venv/bin/python scripts/docs_tables.py --check  # exit 1 when a page is out of date

Each table sits between ``<!-- generated: NAME -->`` and ``<!-- /generated: NAME -->`` in its
page; tests/ops/test_docs_tables.py runs ``--check``. Today: ``mcp-tools`` in
docs/engineers/mcp.md (every tool the MCP server lists, with its title, scope and whether it
writes).
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def mcp_tools() -> str:
    from runs.mcp.server import TOOL_SCOPES, build_server

    server = build_server()
    tools = asyncio.run(server.list_tools())
    rows = ["| tool | what it does | scope | writes |", "|---|---|---|---|"]
    for tool in sorted(tools, key=lambda t: t.name):
        annotations = tool.annotations
        writes = "no" if annotations is not None and annotations.read_only_hint else "yes"
        title = (
            (tool.title or tool.description or "").splitlines()[0] if (tool.title or tool.description) else ""
        )
        rows.append(f"| `{tool.name}` | {title} | `{TOOL_SCOPES.get(tool.name, 'read')}` | {writes} |")
    return "\n".join(rows)


TABLES: dict[str, tuple[str, Callable[[], str]]] = {
    "mcp-tools": ("docs/engineers/mcp.md", mcp_tools),
}


def render(text: str, name: str, table: str) -> str:
    pattern = re.compile(
        rf"(<!-- generated: {re.escape(name)} -->\n)(?:.*?\n)?(<!-- /generated: {re.escape(name)} -->)", re.S
    )
    if not pattern.search(text):
        raise SystemExit(f"no '<!-- generated: {name} -->' block in the page")
    return pattern.sub(lambda m: m.group(1) + table + "\n" + m.group(2), text)


def main(argv: list[str]) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    stale = []
    for name, (page, build) in TABLES.items():
        path = ROOT / page
        text = path.read_text()
        updated = render(text, name, build())
        if updated != text:
            stale.append(page)
            if "--check" not in argv:
                path.write_text(updated)
    if stale and "--check" in argv:
        print("out of date (run scripts/docs_tables.py): " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
