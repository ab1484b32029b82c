"""Typed readers for settings that come from the environment.

Each helper fails loudly (ImproperlyConfigured-style ValueError) on a value it
cannot interpret instead of silently falling back to a default.
"""

from __future__ import annotations

import os
import secrets
from importlib.util import find_spec
from pathlib import Path
from typing import overload
from urllib.parse import parse_qs, unquote, urlparse

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class EnvError(ValueError):
    pass


@overload
def env_str(name: str, default: str) -> str: ...
@overload
def env_str(name: str, default: None = None) -> str | None: ...
def env_str(name: str, default: str | None = None) -> str | None:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise EnvError(f"{name}={raw!r} is not a boolean (use one of 1/0, true/false, yes/no, on/off)")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise EnvError(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise EnvError(f"{name}={value} must be >= {minimum}")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise EnvError(f"{name}={raw!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise EnvError(f"{name}={raw!r} is not a finite number")
    if minimum is not None and value < minimum:
        raise EnvError(f"{name}={value} must be >= {minimum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_egress(name: str, alias: str, default: list[str]) -> list[str]:
    """The egress allowance: ``name`` (else its older ``alias``), comma-separated networks, each
    optionally with one port: ``10.0.0.0/8``, ``127.0.0.1:11434``, ``[::1]:11434`` (see
    runs.providers.egress). Setting both names to different values is an error."""
    import ipaddress

    raw, used = os.environ.get(name), name
    old = os.environ.get(alias)
    if raw is None and old is not None:
        raw, used = old, alias
    elif raw is not None and old is not None and old.strip() != raw.strip():
        raise EnvError(f"{name} and its alias {alias} are both set, to different values: set {name} only")
    if raw is None:
        return default
    items = [item.strip() for item in raw.split(",") if item.strip()]
    for item in items:
        network, port = item, ""
        if item.startswith("["):
            network, _, rest = item[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else ("x" if rest else "")
        elif item.count(":") == 1:
            network, _, port = item.partition(":")
        try:
            ipaddress.ip_network(network, strict=False)
            if port and not (port.isdigit() and 0 < int(port) < 65536):
                raise ValueError(port)
        except ValueError:
            raise EnvError(
                f"{used}: {item!r} is not an IP network with an optional port "
                "(e.g. 10.0.0.0/8, 127.0.0.1:11434, [::1]:11434)"
            ) from None
    return items


def env_endpoints(name: str, default: dict[str, list[str]]) -> dict[str, list[str]]:
    """``VAR=https://host/path,VAR=https://other`` -> {VAR: [urls]} (a variable may repeat)."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    out: dict[str, list[str]] = {}
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        var, sep, url = item.partition("=")
        var, url = var.strip(), url.strip().rstrip("/")
        if not sep or not var or not url.startswith(("https://", "http://")):
            raise EnvError(f"{name}: {item!r} is not VARIABLE=https://endpoint")
        out.setdefault(var, []).append(url)
    return out


def weak_secret_key(key: str) -> str | None:
    """Why `key` is too weak for production (Django's own deploy check: at least 50 characters,
    5 distinct ones, not a generated `django-insecure-` key), or None."""
    if key.startswith("django-insecure"):
        return "it is a django-insecure- development key"
    if len(key) < 50:
        return f"it has {len(key)} characters (at least 50)"
    if len(set(key)) < 5:
        return "it has fewer than 5 distinct characters"
    return None


def env_secret_key(name: str, *, local_file: Path, refuse_weak: bool) -> str:
    """The secret key: from the environment, else a strong key generated once into `local_file`.
    With `refuse_weak` (DEBUG off) a weak key is an error, wherever it came from."""
    raw = os.environ.get(name)
    if raw:
        key = raw
    elif local_file.exists():
        key = local_file.read_text().strip()
    else:
        key = secrets.token_urlsafe(50)
        local_file.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(local_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first
            key = local_file.read_text().strip()
        else:
            with os.fdopen(fd, "w") as fh:
                fh.write(key)
    if refuse_weak:
        reason = weak_secret_key(key)
        if reason:
            where = name if raw else str(local_file)
            raise EnvError(
                f"{where} is too weak for production (DEBUG off): {reason}. "
                "Use e.g. python -c 'import secrets; print(secrets.token_urlsafe(50))'"
            )
    return key


def env_proxy_header(name: str) -> tuple[str, str] | None:
    """SECURE_PROXY_SSL_HEADER from a header name (`X-Forwarded-Proto`) or `Header: value`
    (default value `https`); unset or empty: None (no proxy header trusted)."""
    raw = (os.environ.get(name) or "").strip()
    if not raw:
        return None
    header, _, value = raw.partition(":")
    header, value = header.strip(), (value.strip() or "https")
    if not header or not all(c.isalnum() or c == "-" for c in header):
        raise EnvError(f"{name}={raw!r} is not a header name (e.g. X-Forwarded-Proto)")
    return "HTTP_" + header.upper().replace("-", "_"), value


def private_dir(path: Path) -> Path:
    """``path`` as a folder only its owner may enter (0700), created if needed, tightened if an
    earlier version left it more open: the files in it hold content (prompts, answers, uploads)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        if path.stat().st_mode & 0o077:
            path.chmod(0o700)
    except PermissionError:  # another user's folder: leave it
        pass
    return path


def private_sqlite_file(name: str) -> None:
    """Make the SQLite database file ``name`` readable by its owner only (0600): it holds prompts,
    answers and sessions. Created here before SQLite opens it, because SQLite gives the ``-wal``
    and ``-shm`` files it creates the database file's mode; files left more open by an earlier
    version are tightened."""
    if not name or name == ":memory:" or name.startswith("file:"):
        return
    path = Path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
    for item in (path, Path(f"{name}-wal"), Path(f"{name}-shm"), Path(f"{name}-journal")):
        try:
            if item.stat().st_mode & 0o077:
                item.chmod(0o600)
        except (FileNotFoundError, PermissionError):  # absent, or another user's file: leave it
            pass


def _url_int(options: dict[str, str], name: str, default: int, *, minimum: int) -> int:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise EnvError(f"DATABASE_URL: ?{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise EnvError(f"DATABASE_URL: ?{name}={value} must be >= {minimum}")
    return value


# A pool per process by default: at most this many connections open at once, this many kept open
# when idle; a request that finds every connection taken waits up to POOL_TIMEOUT seconds.
POOL_MIN_SIZE = 2
POOL_MAX_SIZE = 10
POOL_TIMEOUT = 30


def _pool_options(options: dict[str, str]) -> dict | None:
    """``?pool=on`` (with optional ``pool_min``, ``pool_max``, ``pool_timeout``): Django's
    PostgreSQL connection pool (psycopg_pool), one per process; None without ``pool``."""
    raw = options.get("pool")
    extra = sorted(k for k in ("pool_min", "pool_max", "pool_timeout") if k in options)
    if raw is None or raw.strip().lower() in _FALSE:
        if extra and raw is None:
            raise EnvError(f"DATABASE_URL: ?{extra[0]} needs ?pool=on")
        return None
    if raw.strip().lower() not in _TRUE:
        raise EnvError(f"DATABASE_URL: ?pool={raw!r} is not a boolean (on/off, 1/0, true/false)")
    max_size = _url_int(options, "pool_max", POOL_MAX_SIZE, minimum=1)
    min_size = _url_int(options, "pool_min", min(POOL_MIN_SIZE, max_size), minimum=0)
    if min_size > max_size:
        raise EnvError(f"DATABASE_URL: ?pool_min={min_size} is above ?pool_max={max_size}")
    timeout = _url_int(options, "pool_timeout", POOL_TIMEOUT, minimum=1)
    return {"min_size": min_size, "max_size": max_size, "timeout": timeout}


# channels_redis waits for a channel's next message with a blocking pop of this many seconds
# (``RedisChannelLayer.brpop_timeout``), while redis-py 8 gives every read a 5-second socket timeout by
# default: an idle channel's read timed out at the moment the pop returned (redis/redis-py#4091), the
# layer raised ``TimeoutError``, a run's live hub rejoined every ~5 s and a runs list or inbox socket
# closed. The channel layer's connections read for this much longer than the pop.
CHANNEL_LAYER_BLOCKING_POP_SECONDS = 5
CHANNEL_LAYER_SOCKET_TIMEOUT = CHANNEL_LAYER_BLOCKING_POP_SECONDS + 10


def channel_layer_hosts(url: str) -> list[dict]:
    """``CONFIG["hosts"]`` of a ``channels_redis`` layer on ``url``, its reads outliving the blocking pop."""
    return [{"address": url, "socket_timeout": CHANNEL_LAYER_SOCKET_TIMEOUT}]


def database_from_url(url: str, *, base_dir: Path) -> dict:
    """Django DATABASES['default'] from a URL: sqlite:///path or postgres://user:pw@host:port/name."""
    parsed = urlparse(url)
    scheme = parsed.scheme
    options = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
    if scheme == "sqlite":
        # sqlite:///relative.db -> "relative.db"; sqlite:////abs/path.db -> "/abs/path.db"
        name = unquote(parsed.path)[1:] or "db.sqlite3"
        if name != ":memory:" and not os.path.isabs(name):
            name = str(base_dir / name)
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": name,
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                # page_size first: it applies to a new file only (before WAL is set). 8 kB pages
                # hold a trace event's 0.6-1 kB rows with less left over at each page's end than
                # 4 kB ones (issue 53: 725 B less per OTLP span); an existing file keeps its own.
                "init_command": (
                    "PRAGMA page_size=8192; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                    "PRAGMA busy_timeout=20000;"
                ),
            },
            # Tests use a file too (WAL, as served): Django's default in-memory test database
            # shares one cache between connections, whose table locks ("database table is
            # locked") a websocket consumer reading beside a writer would hit at random.
            "TEST": {"NAME": options.get("test_name") or (None if name == ":memory:" else f"{name}.test")},
        }
    if scheme in {"postgres", "postgresql", "pgsql"}:
        name = unquote(parsed.path.lstrip("/"))
        if not name:
            raise EnvError(f"DATABASE_URL {url!r} has no database name")
        conn_max_age = _url_int(options, "conn_max_age", 0, minimum=0)
        pool = _pool_options(options)
        if pool is not None and conn_max_age:
            raise EnvError(
                "DATABASE_URL: ?pool and ?conn_max_age exclude each other (a pooled connection "
                "goes back to the pool after each request; drop conn_max_age)"
            )
        settings = {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "",
            "PORT": str(parsed.port or ""),
            # ?conn_max_age=60 keeps connections open between requests (the scaled profile's ASGI
            # servers: a new PostgreSQL connection per query costs a backend process each time);
            # such connections are checked before reuse.
            "CONN_MAX_AGE": conn_max_age,
            "CONN_HEALTH_CHECKS": conn_max_age > 0,
            "TEST": {"NAME": options.get("test_name") or None},
        }
        if pool is not None:
            settings["OPTIONS"] = {"pool": pool}
        return settings
    raise EnvError(f"DATABASE_URL scheme {scheme!r} is not supported (use sqlite:/// or postgres://)")


def package_dir(name: str) -> Path:
    """The directory of installed package ``name``, found without importing it."""
    spec = find_spec(name)
    if spec is None or spec.origin is None:
        raise EnvError(f"the package {name!r} is not installed")
    return Path(spec.origin).parent
