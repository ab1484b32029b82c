"""Production settings (DEBUG off) as docs/operators/security.md configures them: `check --deploy` finds nothing,
HTTPS is enforced (redirect, HSTS) and honoured behind a proxy, weak secret keys are refused."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.env import EnvError, env_proxy_header, weak_secret_key

ROOT = Path(__file__).resolve().parents[2]


def production_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "DJANGO_SETTINGS_MODULE": "workbench.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3",
        "WORKBENCH_VAR_DIR": str(tmp_path),
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "workbench.example",
        "SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto",
    }
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_check_deploy_is_clean_as_documented(tmp_path):
    proc = manage(production_env(tmp_path), "check", "--deploy", "--fail-level", "WARNING")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no issues" in proc.stdout


def test_check_deploy_is_clean_with_the_generated_key(tmp_path):
    env = production_env(tmp_path)
    del env["SECRET_KEY"]
    proc = manage(env, "check", "--deploy", "--fail-level", "WARNING")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    key_file = tmp_path / "secret_key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert weak_secret_key(key_file.read_text().strip()) is None


def test_debug_on_is_reported_by_check_deploy(tmp_path):
    proc = manage(production_env(tmp_path, DEBUG="1"), "check", "--deploy", "--fail-level", "WARNING")
    assert proc.returncode != 0
    assert "security.W018" in proc.stderr + proc.stdout


@pytest.mark.parametrize(
    "key",
    ["short-key", "a" * 60, "django-insecure-" + secrets.token_urlsafe(50), "ab" * 40],
    ids=["short", "one-letter", "django-insecure", "two-letters"],  # same ids in every xdist worker
)
def test_weak_keys_are_refused_in_production(tmp_path, key):
    proc = manage(production_env(tmp_path, SECRET_KEY=key), "check")
    assert proc.returncode != 0
    assert "SECRET_KEY is too weak for production" in proc.stderr


def test_a_weak_key_is_accepted_for_development(tmp_path):
    proc = manage(production_env(tmp_path, SECRET_KEY="dev", DEBUG="1", ALLOWED_HOSTS="testserver"), "check")
    assert proc.returncode == 0, proc.stderr


HTTPS_PROBE = r"""
import json, django
django.setup()
from django.test import Client
from django.conf import settings
c = Client()
plain = c.get("/accounts/login/", HTTP_HOST="workbench.example")
proxied = c.get("/accounts/login/", HTTP_HOST="workbench.example", HTTP_X_FORWARDED_PROTO="https")
print("PROBE " + json.dumps({
    "plain": [plain.status_code, plain.get("Location")],
    "proxied": [proxied.status_code, proxied.get("Strict-Transport-Security")],
    "cookie_secure": [settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE],
}))
"""


def test_https_is_enforced_and_the_proxy_header_honoured(tmp_path):
    env = production_env(tmp_path)
    assert manage(env, "migrate", "--noinput", "-v", "0").returncode == 0
    proc = subprocess.run(
        [sys.executable, "-c", HTTPS_PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("PROBE ")), None)
    assert line, proc.stdout + proc.stderr
    probe = json.loads(line[6:])
    assert probe["plain"] == [301, "https://workbench.example/accounts/login/"]
    assert probe["proxied"] == [200, "max-age=31536000; includeSubDomains; preload"]
    assert probe["cookie_secure"] == [True, True]


def test_proxy_header_reader(monkeypatch):
    for raw, expected in [
        ("X-Forwarded-Proto", ("HTTP_X_FORWARDED_PROTO", "https")),
        ("X-Scheme: HTTPS-ON", ("HTTP_X_SCHEME", "HTTPS-ON")),
        ("", None),
    ]:
        monkeypatch.setenv("WB_TEST_PROXY_HEADER", raw)
        assert env_proxy_header("WB_TEST_PROXY_HEADER") == expected
    monkeypatch.setenv("WB_TEST_PROXY_HEADER", "X Forwarded")
    with pytest.raises(EnvError):
        env_proxy_header("WB_TEST_PROXY_HEADER")
