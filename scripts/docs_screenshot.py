"""Retake docs/img/run-gate.png: the demo's run waiting at a gate, signed in as the demo's admin.

Against a server with `make run`'s demo data (own port and var dir, e.g.
`WORKBENCH_VAR_DIR=/tmp/demo DATABASE_URL=sqlite:////tmp/demo/db.sqlite3 DEBUG=1`, then
`manage.py migrate`, `manage.py demo_data --url URL`, `daphne -p PORT workbench.asgi:application`):

    .venv/bin/python scripts/docs_screenshot.py http://127.0.0.1:8765 /tmp/demo/admin_password
"""

from __future__ import annotations

import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

OUT = Path(__file__).resolve().parents[1] / "docs" / "img" / "run-gate.png"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]  # fmt: skip


def main(base: str, password_file: str) -> None:
    password = Path(password_file).read_text().strip()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.goto(base + "/accounts/login/")
        page.fill("input[name=username]", "admin")
        page.fill("input[name=password]", password)
        page.click("button[type=submit], input[type=submit]")
        page.wait_for_load_state("networkidle")
        page.goto(base + "/runs/run_demo_jobsearch/")
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(1000)
        # from the run's title to the gate panel's buttons (the site's navigation left out)
        page.screenshot(path=str(OUT), full_page=True, clip={"x": 0, "y": 160, "width": 1200, "height": 1000})
        browser.close()
    print(f"{OUT} ({OUT.stat().st_size // 1024} KB)")


if __name__ == "__main__":
    main(*sys.argv[1:3])
