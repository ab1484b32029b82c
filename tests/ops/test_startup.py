"""Management commands start without the heavy modules: no daphne/twisted, no REST API, no URL tree;
`manage.py check` still loads and checks every URL. (What is imported, not how long it takes:
the timings are in `make bench`, bench/bench_startup.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = r"""
import io, json, os, sys
sys.argv = ["manage.py", *json.loads(os.environ["PROBE_ARGV"])]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
from workbench.startup import configure_for_command
configure_for_command(sys.argv)
from django.core.management import execute_from_command_line
out = io.StringIO()
sys.stdout, real = out, sys.stdout
try:
    execute_from_command_line(sys.argv)
except SystemExit:
    pass
sys.stdout = real
# cryptography is not listed: django-oauth-toolkit's models (an installed app: OAuth for MCP hosts)
# import jwcrypto, which imports it, whenever the app registry loads; nothing of ours does.
heavy = ("daphne", "twisted", "autobahn", "ninja", "pydantic", "runs.api", "runs.pages", "workbench.urls",
         "anthropic", "openai", "opentelemetry", "mcp", "google.protobuf", "langgraph", "genai_prices")
print("LOADED " + json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in heavy or m in heavy)))
"""


def loaded_after(tmp_path: Path, *argv: str) -> list[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3",
        "WORKBENCH_VAR_DIR": str(tmp_path),
        "PROBE_ARGV": json.dumps(list(argv)),
    }
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("LOADED ")), None)
    assert line, proc.stdout + proc.stderr
    return json.loads(line[7:])


def test_common_commands_load_nothing_heavy(tmp_path):
    for argv in (["help"], ["showmigrations"], ["migrate", "--noinput", "-v", "0"], ["tokens", "--help"]):
        assert loaded_after(tmp_path, *argv) == [], argv


def test_check_still_loads_and_checks_the_urls(tmp_path):
    loaded = loaded_after(tmp_path, "check")
    assert "workbench.urls" in loaded and "runs.api" in loaded


def test_runserver_is_daphnes_asgi_server():
    from django.core.management import get_commands, load_command_class

    app = get_commands()["runserver"]
    assert app == "workbench"
    command = load_command_class(app, "runserver")
    assert type(command).__module__ == "daphne.management.commands.runserver"


def test_api_docs_files_are_project_static_files():
    """django-ninja is not an installed app (it would be imported at every start); its Swagger UI
    files are found as static files all the same."""
    from django.conf import settings
    from django.contrib.staticfiles import finders

    assert "ninja" not in settings.INSTALLED_APPS
    assert finders.find("ninja/swagger-ui-bundle.js")
