"""Workbench settings: everything that varies comes from the environment (see workbench/env.py)."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

from workbench.env import (
    channel_layer_hosts,
    database_from_url,
    env_bool,
    env_egress,
    env_endpoints,
    env_float,
    env_int,
    env_list,
    env_proxy_header,
    env_secret_key,
    env_str,
    package_dir,
    private_dir,
    private_sqlite_file,
)

# The code: the repository in a checkout, site-packages in an installed wheel.
BASE_DIR = Path(__file__).resolve().parent.parent
# Templates and static files: the repository's templates/ and static/ in a checkout; an installed
# wheel carries them inside this package (setup.py copies them to workbench/templates, workbench/static).
_PACKAGED_RESOURCES = Path(__file__).resolve().parent
RESOURCE_DIR = _PACKAGED_RESOURCES if (_PACKAGED_RESOURCES / "templates").is_dir() else BASE_DIR
# The server's data (var/: the SQLite database, the secret key, signing keys, spools): under
# WORKBENCH_HOME; by default the checkout itself (var/ beside manage.py) or, for an installed wheel,
# the directory the command runs in (./var, as `workbench serve` prints).
_CHECKOUT = (BASE_DIR / "manage.py").is_file()
HOME_DIR = Path(env_str("WORKBENCH_HOME", str(BASE_DIR if _CHECKOUT else Path.cwd()))).resolve()
VAR_DIR = Path(env_str("WORKBENCH_VAR_DIR", str(HOME_DIR / "var")))

# Off unless asked for: `make run` (local development) and the test suite (tests/settings.py) turn it on.
DEBUG = env_bool("DEBUG", False)
# From the environment (every process of a deployment must share it); else a strong key generated
# once into var/secret_key (0600). With DEBUG off a weak key (short, repetitive, django-insecure-) is refused.
SECRET_KEY = env_secret_key("SECRET_KEY", local_file=VAR_DIR / "secret_key", refuse_weak=not DEBUG)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# "workbench" comes before staticfiles: its `runserver` (daphne, ASGI) wins over the WSGI one.
INSTALLED_APPS = [
    "workbench",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "runs",
    "playground",
    "review",
    "judges",
    "accounts",
    "evals",
    "django_tasks_db",  # django.tasks' database backend: task rows, run by `manage.py worker`
    "oauth2_provider",
]

# The migrations of Django's contrib apps and of the libraries' apps come from workbench/vendored_migrations/:
# exact copies of theirs plus one squashed migration each, so that `migrate` on an empty database
# applies one per app (issue 53). scripts/vendor_migrations.py refreshes them on a library upgrade.
MIGRATION_MODULES = {
    label: f"workbench.vendored_migrations.{label}"
    for label in ("admin", "auth", "contenttypes", "django_tasks_database", "oauth2_provider")
}

MIDDLEWARE = [
    "runs.web.uploads.BodyLimitMiddleware",  # before anything reads the body (CSRF reads forms)
    "runs.web.request_limits.UrlLengthMiddleware",  # 414 before anything routes a huge URL
    "runs.ids.RawApiPathMiddleware",  # before anything resolves a URL: ids with "/" in REST paths
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "runs.web.origin.site_origin_middleware",  # links in notifications name this server (no WORKBENCH_SITE_URL)
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # last: sees what a view raises first; branded 403/404/500 pages under DEBUG too
    "runs.web.error_pages.BrandedErrorPagesMiddleware",
]
# DEBUG's own error pages (tracebacks) instead of the branded ones: an explicit choice.
WORKBENCH_DEBUG_ERROR_PAGES = env_bool("WORKBENCH_DEBUG_ERROR_PAGES", False)

ROOT_URLCONF = "workbench.urls"
ASGI_APPLICATION = "workbench.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [RESOURCE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.csp",
                "runs.web.request.nav",
            ],
        },
    },
]

DATABASES = {
    "default": database_from_url(env_str("DATABASE_URL") or "sqlite:///var/db.sqlite3", base_dir=HOME_DIR)
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    private_sqlite_file(DATABASES["default"]["NAME"])  # 0600, and so its -wal and -shm files
# A streaming read replica of the primary (docs/scaling.md): page and list reads go there, a request
# that wrote and a browser that wrote in the last REPLICA_PIN_SECONDS read the primary.
DATABASE_REPLICA_URL = env_str("DATABASE_REPLICA_URL")
REPLICA_PIN_SECONDS = env_float("REPLICA_PIN_SECONDS", 5.0, minimum=0.0)
if DATABASE_REPLICA_URL:
    DATABASES["replica"] = database_from_url(DATABASE_REPLICA_URL, base_dir=HOME_DIR)
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}  # tests: the same database under two aliases
    DATABASE_ROUTERS = ["workbench.replica.ReplicaRouter"]
    MIDDLEWARE.insert(
        MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,
        "workbench.replica.ReplicaReadMiddleware",
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": channel_layer_hosts(REDIS_URL), "capacity": 1000, "expiry": 30},
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {"capacity": 1000}}
    }

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "runs:list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
# django-ninja's Swagger UI files serve /api/docs (no CDN; templates/ninja/swagger.html). Found
# without importing django-ninja, which is not an installed app: management commands start faster.
STATICFILES_DIRS = [RESOURCE_DIR / "static", package_dir("ninja") / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# Security: request size limit (25 MB bodies), CSP with nonces, strict cookies.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("WORKBENCH_MAX_BODY_BYTES", 25 * 1024 * 1024, minimum=1024)
# Bundle imports alone (POST /api/bundles, the /import/ upload) may be larger: 8 GiB by default.
# Their body is copied to var/imports in chunks, never held in memory (runs/web/spool.py).
WORKBENCH_MAX_BUNDLE_BYTES = env_int("WORKBENCH_MAX_BUNDLE_BYTES", 8 * 1024**3, minimum=1024)
# Uploads (and ASGI bodies) beyond this many bytes go to a temporary file, never whole into memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 256 * 1024
# ... into var/uploads (0700; the files are 0600), not the shared /tmp: an upload holds content.
FILE_UPLOAD_TEMP_DIR = str(private_dir(VAR_DIR / "uploads"))
# The same limit for multipart uploads (the import page) and at the ASGI door: see runs/web/uploads.py.
FILE_UPLOAD_HANDLERS = [
    "runs.web.uploads.BodyLimitUploadHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
# Approve in the gate panel and the inbox waits this long (with an Undo) before it is sent; 0: at once.
WORKBENCH_APPROVE_UNDO_MS = env_int("WORKBENCH_APPROVE_UNDO_MS", 5000, minimum=0)
# Workspace invitations wait this many days for the invitee's answer.
WORKBENCH_INVITATION_DAYS = env_int("WORKBENCH_INVITATION_DAYS", 7, minimum=1)
WORKBENCH_IMPORT_UPLOAD_TTL_SECONDS = env_int("WORKBENCH_IMPORT_UPLOAD_TTL_SECONDS", 3600, minimum=60)
DATA_UPLOAD_MAX_NUMBER_FIELDS = 10_000
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
# `workbench serve` on a loopback address turns both off (plain HTTP on this machine only).
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
# HTTPS (production, DEBUG off): plain-HTTP requests are redirected and browsers told to stay on
# HTTPS (HSTS, one year, subdomains, preload list). Behind a TLS-terminating proxy, name the header
# it sets (SECURE_PROXY_SSL_HEADER=X-Forwarded-Proto) so proxied HTTPS requests count as secure;
# the proxy must overwrite that header on every request. Each knob can be set in the environment.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", not DEBUG)
SECURE_PROXY_SSL_HEADER = env_proxy_header("SECURE_PROXY_SSL_HEADER")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

from django.utils.csp import CSP  # noqa: E402

# The page frame's CSS, inlined in every page's <head> (runs.templatetags.workbench.critical_css) so
# pages are in their colours, light or dark, from the first paint; allowed by its hash (pages
# rendered without a request, like the CSRF failure and 500 pages, have no nonce to give it).
# The design tokens (static/workbench/tokens.css) come first: every stylesheet reads them.
WORKBENCH_CRITICAL_CSS = "".join(
    (RESOURCE_DIR / "static" / "workbench" / name).read_text(encoding="utf-8")
    for name in ("tokens.css", "critical.css")
)
WORKBENCH_CRITICAL_CSS_SOURCE = (
    f"'sha256-{base64.b64encode(hashlib.sha256(WORKBENCH_CRITICAL_CSS.encode()).digest()).decode()}'"
)

SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF, CSP.NONCE],
    "style-src": [CSP.SELF, CSP.NONCE, WORKBENCH_CRITICAL_CSS_SOURCE],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
    "form-action": [CSP.SELF],
    "base-uri": [CSP.SELF],
    "object-src": [CSP.NONE],
}

# Workbench knobs.
# The documentation site (mkdocs.yml), built by `make setup` and the wheel's build step, served at /docs/.
WORKBENCH_DOCS_DIR = Path(env_str("WORKBENCH_DOCS_DIR") or Path(__file__).resolve().parent / "docs_site")
WORKBENCH_SNAPSHOT_INTERVAL = env_int("WORKBENCH_SNAPSHOT_INTERVAL", 1000, minimum=10)
# GET /api/runs/{id}/gates/wait: a decision taken in this process wakes the waiting request at
# once; decisions taken in another server process (the scaled profile) are seen by a database look
# this often.
GATE_WAIT_POLL_SECONDS = env_int("WORKBENCH_GATE_WAIT_POLL_MS", 1000, minimum=50) / 1000
# Live transcripts (seed 003): one JSONL file per run, appended after each commit (runs.telemetry.transcript_log).
WORKBENCH_TRANSCRIPTS = env_bool("WORKBENCH_TRANSCRIPTS", True)
# The transcript of a run an OTLP trace became: "read" (written by its first read, live from
# then on: the content is in its events already) or "live" (written as every other run's).
WORKBENCH_TRANSCRIPTS_OF_TRACES = env_str("WORKBENCH_TRANSCRIPTS_OF_TRACES", "read")
WORKBENCH_TRANSCRIPT_DIR = Path(env_str("WORKBENCH_TRANSCRIPT_DIR", str(VAR_DIR / "transcripts")))
WORKBENCH_RATE_LIMIT_PER_MINUTE = env_int("WORKBENCH_RATE_LIMIT_PER_MINUTE", 600, minimum=1)

# Playground executions and forks re-executed by the workbench are django.tasks tasks
# (playground.execute.execution_task, runs.execution.replay.fork_task), run by the task workers.
# Modules that register step code (runs.engine.programs) in every process, comma-separated.
WORKBENCH_PROGRAM_MODULES = [
    m.strip() for m in env_str("WORKBENCH_PROGRAM_MODULES", "runs.demo.job_search").split(",") if m.strip()
]
# Retention of the response cache (seed 002's invocation log): a cached model answer expires this
# many days after it was recorded or last used by a replay (0 = never); expired answers no longer
# answer replays (a replay that needs one is refused, 410 REPLAY_DATA_EXPIRED) and are deleted
# by `manage.py prune_replay_data` (and by the workers' retention pass).
WORKBENCH_REPLAY_CACHE_DAYS = env_int("WORKBENCH_REPLAY_CACHE_DAYS", 90, minimum=0)
# Runs that ended this many days ago are deleted by `manage.py prune_runs` (in bounded batches,
# runs.actions.retention); 0 keeps every run.
WORKBENCH_RUN_RETENTION_DAYS = env_int("WORKBENCH_RUN_RETENTION_DAYS", 0, minimum=0)
# PostgreSQL: the event table is partitioned by ranges of the run's key, one range (or more) per
# month, each this many run keys wide (runs.actions.partitions; docs/operators/retention.md).
WORKBENCH_EVENT_PARTITION_RUNS = env_int("WORKBENCH_EVENT_PARTITION_RUNS", 1_000_000, minimum=1000)
# Bundles from this size on are imported by a background job (`202` with the job from the API).
WORKBENCH_IMPORT_ASYNC_BYTES = env_int("WORKBENCH_IMPORT_ASYNC_BYTES", 8 * 1024 * 1024, minimum=0)
# PostgreSQL: after an import job stored this many events, it runs VACUUM (ANALYZE) on the event table
# (0: never), so the run's pages read its rows index-only at once instead of after autovacuum.
WORKBENCH_IMPORT_VACUUM_EVENTS = env_int("WORKBENCH_IMPORT_VACUUM_EVENTS", 100_000, minimum=0)
# Outbound requests (runs.providers.egress: playground providers, OTLP export, webhooks later)
# go to public addresses only, plus what the operator allows here: comma-separated networks, each
# optionally with one port (10.0.0.0/8, 127.0.0.1:11434, [::1]:11434). This allowance applies to
# every request, also to a provider base URL that a workspace member typed. In the embedded profile
# (SQLite, no Redis: one person's machine) the operator's own destinations (global providers, the
# OTLP collector) may reach loopback without it; a workspace's providers never may unless listed.
# PLAYGROUND_EGRESS_ALLOW is the older name of the same setting, still read as an alias.
EMBEDDED_PROFILE = DATABASES["default"]["ENGINE"].endswith("sqlite3") and not REDIS_URL
WORKBENCH_EGRESS_ALLOW = env_egress("WORKBENCH_EGRESS_ALLOW", "PLAYGROUND_EGRESS_ALLOW", [])
# Notification deliveries (runs.notifications.delivery). Timeouts of one attempt in seconds: the
# connect and read timeouts, and a hard deadline on the whole attempt (a receiver trickling bytes
# is cut off there). How long a claimed delivery stays with its worker (a worker killed
# mid-delivery leaves it due again after this lease; longer than the deadline). Attempts in
# flight at once per task, and at most per hook and per receiving host (across all workers).
# Circuit breaker per hook: open after this many consecutive failures, for a cooldown that doubles
# with each opening up to the maximum; then one delivery probes (half-open), a success closes it.
WORKBENCH_NOTIFY_CONNECT_TIMEOUT = env_float("WORKBENCH_NOTIFY_CONNECT_TIMEOUT", 3, minimum=0.1)
WORKBENCH_NOTIFY_READ_TIMEOUT = env_float("WORKBENCH_NOTIFY_READ_TIMEOUT", 10, minimum=0.1)
WORKBENCH_NOTIFY_DEADLINE = env_float("WORKBENCH_NOTIFY_DEADLINE", 15, minimum=0.5)
WORKBENCH_NOTIFY_LEASE_SECONDS = env_int("WORKBENCH_NOTIFY_LEASE_SECONDS", 60, minimum=1)
if WORKBENCH_NOTIFY_LEASE_SECONDS < WORKBENCH_NOTIFY_DEADLINE + 5:
    raise ValueError("WORKBENCH_NOTIFY_LEASE_SECONDS must exceed WORKBENCH_NOTIFY_DEADLINE by 5 s at least")
WORKBENCH_NOTIFY_CONCURRENCY = env_int("WORKBENCH_NOTIFY_CONCURRENCY", 16, minimum=1)
WORKBENCH_NOTIFY_PER_HOOK = env_int("WORKBENCH_NOTIFY_PER_HOOK", 2, minimum=1)
WORKBENCH_NOTIFY_PER_HOST = env_int("WORKBENCH_NOTIFY_PER_HOST", 8, minimum=1)
WORKBENCH_NOTIFY_BREAKER_FAILURES = env_int("WORKBENCH_NOTIFY_BREAKER_FAILURES", 5, minimum=1)
# E-mailed decision links (runs.actions.gatelinks): hours a link stays valid.
WORKBENCH_EMAIL_LINK_HOURS = env_float("WORKBENCH_EMAIL_LINK_HOURS", 24, minimum=0.01)
WORKBENCH_NOTIFY_BREAKER_COOLDOWN = env_float("WORKBENCH_NOTIFY_BREAKER_COOLDOWN", 30, minimum=0.1)
WORKBENCH_NOTIFY_BREAKER_MAX_COOLDOWN = env_float("WORKBENCH_NOTIFY_BREAKER_MAX_COOLDOWN", 3600, minimum=0.1)
# Background work goes through Django's tasks framework (django.tasks) on django-tasks-db: a task
# is a row in this database, written in the transaction of the request that asked for it, and run
# by `manage.py worker` processes (any number, each with --threads N; runs/background/worker.py).
# "database" in every profile; "dummy" records tasks without running them (the test suite runs
# them itself). A worker whose heartbeat is older than WORKBENCH_WORKER_LEASE_SECONDS has lost its
# lease: the tasks it was running are put back to READY and run again.
WORKBENCH_TASKS_BACKEND = env_str("WORKBENCH_TASKS_BACKEND", "database")
_TASK_BACKENDS = {
    "database": "django_tasks_db.DatabaseBackend",
    "dummy": "django.tasks.backends.dummy.DummyBackend",
}
if WORKBENCH_TASKS_BACKEND not in _TASK_BACKENDS:
    raise ValueError(
        "WORKBENCH_TASKS_BACKEND must be database or dummy (the in-process runner is gone: "
        "run `manage.py worker` beside the server)"
    )
TASKS = {
    "default": {
        "BACKEND": _TASK_BACKENDS[WORKBENCH_TASKS_BACKEND],
        "QUEUES": ["default", "notifications"],
    }
}
WORKBENCH_WORKER_LEASE_SECONDS = env_float("WORKBENCH_WORKER_LEASE_SECONDS", 30.0, minimum=1)
# An experiment whose item's fork another worker runs does not wait for it: its task ends and a
# new task row for it runs this many seconds later (evals.runner.come_back).
WORKBENCH_EXPERIMENT_RECHECK_SECONDS = env_float("WORKBENCH_EXPERIMENT_RECHECK_SECONDS", 2.0, minimum=0)
# Finished task rows are deleted after this many days (a periodic task of the workers).
WORKBENCH_TASK_RESULT_DAYS = env_int("WORKBENCH_TASK_RESULT_DAYS", 7, minimum=1)
# E-mail (gate and run notifications, disabled-webhook notices) through Django's mailers: the
# console in development (`make run` prints them), SMTP otherwise; see docs/deployment.md.
EMAIL_BACKEND_NAME = env_str("WORKBENCH_EMAIL", "console" if DEBUG else "smtp")
if EMAIL_BACKEND_NAME not in ("console", "smtp"):
    raise ValueError("WORKBENCH_EMAIL must be console or smtp")
MAILERS = {
    "default": {"BACKEND": "runs.notifications.console_mail.EmailBackend"}
    if EMAIL_BACKEND_NAME == "console"
    else {
        "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "OPTIONS": {
            "host": env_str("EMAIL_HOST", "localhost"),
            "port": env_int("EMAIL_PORT", 25, minimum=1),
            "username": env_str("EMAIL_HOST_USER", "") or None,
            "password": env_str("EMAIL_HOST_PASSWORD", "") or None,
            "use_tls": env_bool("EMAIL_USE_TLS", False),
            "use_ssl": env_bool("EMAIL_USE_SSL", False),
            "timeout": env_int("EMAIL_TIMEOUT", 15, minimum=1),
        },
    }
}
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "workbench@localhost")
# Operator keys: the environment variables that global (operator) providers may read, each with
# the only endpoints its value is ever sent to. A workspace never names a variable.
# Format: PLAYGROUND_OPERATOR_KEYS="ANTHROPIC_API_KEY=https://api.anthropic.com,OPENAI_API_KEY=..."
PLAYGROUND_OPERATOR_KEYS = env_endpoints(
    "PLAYGROUND_OPERATOR_KEYS",
    {"ANTHROPIC_API_KEY": ["https://api.anthropic.com"], "OPENAI_API_KEY": ["https://api.openai.com/v1"]},
)
# Rate limits (accounts.ratelimit): per credential (token or session) and per workspace (0 = off),
# counted per window in the cache (Redis when REDIS_URL is set, so every process shares it).
WORKBENCH_RATE_LIMIT_WORKSPACE_PER_MINUTE = env_int(
    "WORKBENCH_RATE_LIMIT_WORKSPACE_PER_MINUTE", 6000, minimum=0
)
# Playground sends spend money: provider calls per workspace per sliding minute (0 = no limit).
PLAYGROUND_SEND_RATE_PER_MINUTE = env_int("PLAYGROUND_SEND_RATE_PER_MINUTE", 30, minimum=0)
# Failed sign-ins per sliding window (accounts/login.py; 0 = no limit): per account name from one
# client address (then that address is refused for that name; from every address, that many
# failures slow the name down to one attempt per address per WORKBENCH_LOGIN_SLOWDOWN_SECONDS,
# so the owner still signs in from a new address), and per client address across names.
WORKBENCH_LOGIN_FAILURES_PER_ACCOUNT = env_int("WORKBENCH_LOGIN_FAILURES_PER_ACCOUNT", 10, minimum=0)
WORKBENCH_LOGIN_SLOWDOWN_SECONDS = env_int("WORKBENCH_LOGIN_SLOWDOWN_SECONDS", 5, minimum=1)
WORKBENCH_LOGIN_FAILURES_PER_ADDRESS = env_int("WORKBENCH_LOGIN_FAILURES_PER_ADDRESS", 50, minimum=0)
WORKBENCH_LOGIN_FAILURE_WINDOW_SECONDS = env_int("WORKBENCH_LOGIN_FAILURE_WINDOW_SECONDS", 900, minimum=10)
WORKBENCH_RATE_LIMIT_WINDOW_SECONDS = env_int("WORKBENCH_RATE_LIMIT_WINDOW_SECONDS", 60, minimum=1)
# OAuth 2.1 for MCP hosts (django-oauth-toolkit; accounts.oauth): the authorization-code grant with
# PKCE S256 only, open dynamic client registration (RFC 7591), tokens bound to one workspace.
OAUTH2_PROVIDER = {
    "SCOPES": {
        "read": "Read runs, events and bundles",
        "write": "Start runs, append events, import, cancel, delete",
        "review": "Resolve gates, edit artifacts, annotate",
    },
    "DEFAULT_SCOPES": ["read"],
    "OAUTH2_VALIDATOR_CLASS": "accounts.oauth.WorkspaceOAuth2Validator",
    "PKCE_REQUIRED": True,
    "ACCESS_TOKEN_EXPIRE_SECONDS": env_int("WORKBENCH_OAUTH_ACCESS_TOKEN_SECONDS", 3600, minimum=60),
    "REFRESH_TOKEN_EXPIRE_SECONDS": env_int("WORKBENCH_OAUTH_REFRESH_TOKEN_SECONDS", 30 * 86400, minimum=60),
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "REQUEST_APPROVAL_PROMPT": "force",
    "DCR_ENABLED": True,
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none", "client_secret_post", "client_secret_basic"],
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,  # bearer tokens in headers only, never in URLs
    "OAUTH2_PROTECTED_RESOURCE_BEARER_METHODS_SUPPORTED": ["header"],
}
# MCP hosts are native apps whose OAuth callback is http://127.0.0.1:<port> (RFC 8252): "http"
# redirect URIs stay allowed, and accounts.oauth.WorkspaceOAuth2Validator accepts them only on
# loopback hosts, so the library's blanket warning about plaintext redirects is silenced.
SILENCED_SYSTEM_CHECKS = ["oauth2_provider.W008"]
# POSTs per client address per rate window to /oauth/token/, /oauth/register/, /oauth/revoke_token/.
WORKBENCH_OAUTH_REQUESTS_PER_ADDRESS = env_int("WORKBENCH_OAUTH_REQUESTS_PER_ADDRESS", 60, minimum=0)
# MCP request_decision: how long one call is held open waiting for the reviewer before it answers
# "pending" / "input required" (the client asks again). Under the usual 60 s proxy idle timeout.
WORKBENCH_MCP_DECISION_WAIT_SECONDS = env_int("WORKBENCH_MCP_DECISION_WAIT_SECONDS", 25, minimum=0)
WORKBENCH_IDEMPOTENCY_TTL_SECONDS = env_int("WORKBENCH_IDEMPOTENCY_TTL_SECONDS", 24 * 3600, minimum=60)
if REDIS_URL:
    # Django's RedisCache, its connection pool shared by every request of the process
    CACHES = {"default": {"BACKEND": "workbench.cache.SharedPoolRedisCache", "LOCATION": REDIS_URL}}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "WARNING")},
    "loggers": {"django": {"handlers": ["console"], "level": env_str("DJANGO_LOG_LEVEL", "WARNING")}},
}

# Discovery files (workbench/discovery.py): the public origin used in absolute links (default:
# the request's own), the security.txt contact (an address or URI; default: the first of ADMINS,
# else the policy page) and policy URL, and how far ahead security.txt expires (RFC 9116: < 1 year).
WORKBENCH_SITE_NAME = env_str("WORKBENCH_SITE_NAME", "Workbench")
WORKBENCH_SITE_URL = env_str("WORKBENCH_SITE_URL", "")
# Slack apps' Web API (chat.postMessage, chat.update, views.open...): an operator setting, never an
# owner's (tests point it at a loopback fake). Ends with "/", as slack_sdk's base_url does.
WORKBENCH_SLACK_API_URL = env_str("WORKBENCH_SLACK_API_URL", "https://slack.com/api/")
WORKBENCH_SECURITY_CONTACT = env_str("WORKBENCH_SECURITY_CONTACT", "")
WORKBENCH_SECURITY_POLICY_URL = env_str("WORKBENCH_SECURITY_POLICY_URL", "")
WORKBENCH_SECURITY_TXT_DAYS = env_int("WORKBENCH_SECURITY_TXT_DAYS", 180, minimum=1)
if WORKBENCH_SECURITY_TXT_DAYS > 364:
    raise ValueError("WORKBENCH_SECURITY_TXT_DAYS must be under a year (RFC 9116)")

# Signed bundles (runs/actions/signing.py). The instance key: WORKBENCH_SIGNING_KEY (an Ed25519
# seed, base64 of 32 bytes, or the path of a file holding one) for operators; else a key created on
# first use into WORKBENCH_SIGNING_KEY_DIR (0600), rotated with `manage.py signing_key`. The
# instance name in every signature: WORKBENCH_INSTANCE, else WORKBENCH_SITE_URL, else "workbench".
WORKBENCH_SIGNING_KEY = env_str("WORKBENCH_SIGNING_KEY", "")
WORKBENCH_SIGNING_KEY_DIR = Path(env_str("WORKBENCH_SIGNING_KEY_DIR", str(VAR_DIR / "signing")))
WORKBENCH_INSTANCE = env_str("WORKBENCH_INSTANCE", "") or WORKBENCH_SITE_URL or "workbench"

# Continuous OTLP/HTTP export of finished runs (runs/telemetry/otel_stream.py): on when
# OTEL_EXPORTER_OTLP_ENDPOINT names a collector (headers from OTEL_EXPORTER_OTLP_HEADERS).
# WORKBENCH_OTEL_SEMCONV: "reference" (the reference's mapping, default) or "current" (GenAI 1.42).
WORKBENCH_OTEL_ENDPOINT = env_str("OTEL_EXPORTER_OTLP_ENDPOINT", "")
WORKBENCH_OTEL_SERVICE_NAME = env_str("OTEL_SERVICE_NAME", "workbench")
WORKBENCH_OTEL_SEMCONV = env_str("WORKBENCH_OTEL_SEMCONV", "reference")
if WORKBENCH_OTEL_SEMCONV not in ("reference", "current"):
    raise ValueError("WORKBENCH_OTEL_SEMCONV must be reference or current")

# OTLP ingest (runs/actions/otlp.py): a run created for a trace ends when its root span has ended
# and no span of the trace arrived for this many seconds (a periodic task of the workers; by hand:
# manage.py otlp_sweep). Content log records wait this long for
# their span, at most this many per workspace.
WORKBENCH_OTLP_QUIET_SECONDS = env_float("WORKBENCH_OTLP_QUIET_SECONDS", 30.0, minimum=0)
WORKBENCH_OTLP_PENDING_LOG_SECONDS = env_int("WORKBENCH_OTLP_PENDING_LOG_SECONDS", 600, minimum=1)
WORKBENCH_OTLP_PENDING_LOGS_MAX = env_int("WORKBENCH_OTLP_PENDING_LOGS_MAX", 20_000, minimum=0)
# The OTLP queue (runs/actions/otlp_queue.py): /v1/traces answers once a request's spans are checked
# and spooled, and a worker process stores them (`manage.py otlp_worker`; the embedded profile's
# server starts its own). A span is queryable within about QUEUE_SECONDS of its answer: the receiver
# waits for room in that window, and answers 503 + Retry-After after QUEUE_WAIT_SECONDS. Off: the
# request stores its spans before answering (the scaled profile's default: start workers to use it).
WORKBENCH_OTLP_QUEUE = env_bool("WORKBENCH_OTLP_QUEUE", EMBEDDED_PROFILE)
WORKBENCH_OTLP_WORKER_INPROCESS = env_bool("WORKBENCH_OTLP_WORKER_INPROCESS", EMBEDDED_PROFILE)
# Start that worker with the server (the embedded profile's default: a bare `daphne
# workbench.asgi:application` starts it too), not on the first OTLP request; off, a server starts
# it on the first OTLP request (or at once when spans wait in the spool).
WORKBENCH_OTLP_WORKER_AT_START = env_bool("WORKBENCH_OTLP_WORKER_AT_START", EMBEDDED_PROFILE)
WORKBENCH_OTLP_SPOOL_DIR = Path(env_str("WORKBENCH_OTLP_SPOOL_DIR", str(VAR_DIR / "otlp-spool")))
# 5 s (0.7 s before issue 53): a 10,000-span burst is answered at the receiver's pace, not the
# worker's, and every span is still queryable within seconds (Phoenix's lag: minutes).
WORKBENCH_OTLP_QUEUE_SECONDS = env_float("WORKBENCH_OTLP_QUEUE_SECONDS", 5.0, minimum=0.05)
WORKBENCH_OTLP_QUEUE_WAIT_SECONDS = env_float("WORKBENCH_OTLP_QUEUE_WAIT_SECONDS", 20.0, minimum=0)
# A worker stores bodies queued one after the other together, up to this many spans (one
# transaction per run for all of them); 0: one body at a time.
WORKBENCH_OTLP_WORKER_BATCH_SPANS = env_int("WORKBENCH_OTLP_WORKER_BATCH_SPANS", 1024, minimum=0)
# On SQLite, the worker's connection copies the WAL into the database (a checkpoint, two fsyncs)
# only past this many pages of 4 KiB, and whenever its queue runs empty; SQLite's own default
# (1,000 pages, about every second batch of a burst) when 0. See runs/telemetry/otlp_worker.py.
WORKBENCH_OTLP_WORKER_CHECKPOINT_PAGES = env_int("WORKBENCH_OTLP_WORKER_CHECKPOINT_PAGES", 16384, minimum=0)
# The scaled profile's OTLP buffer (runs/actions/otlp_streams.py): WORKBENCH_OTLP_BUFFER=redis puts each
# accepted /v1/traces batch in the Redis Stream WORKBENCH_OTLP_STREAM (on REDIS_URL) and answers once
# Redis has it; `manage.py otlp_storer` processes store them (any number, a consumer group). A 503
# + Retry-After while MAX_BATCHES wait; a storer's entries are taken over after LEASE_SECONDS.
# "spool" (default): the file spool above when WORKBENCH_OTLP_QUEUE is on (the embedded profile).
WORKBENCH_OTLP_BUFFER = env_str("WORKBENCH_OTLP_BUFFER", "spool")
if WORKBENCH_OTLP_BUFFER not in ("spool", "redis"):
    raise ValueError("WORKBENCH_OTLP_BUFFER must be spool or redis")
if WORKBENCH_OTLP_BUFFER == "redis" and not REDIS_URL:
    raise ValueError("WORKBENCH_OTLP_BUFFER=redis needs REDIS_URL")
WORKBENCH_OTLP_STREAM = env_str("WORKBENCH_OTLP_STREAM", "workbench:otlp")
WORKBENCH_OTLP_STREAM_MAX_BATCHES = env_int("WORKBENCH_OTLP_STREAM_MAX_BATCHES", 20_000, minimum=1)
WORKBENCH_OTLP_STREAM_LEASE_SECONDS = env_float("WORKBENCH_OTLP_STREAM_LEASE_SECONDS", 30.0, minimum=0.1)
