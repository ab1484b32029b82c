"""The egress guard (:mod:`runs.providers.egress`) for clients that speak ``requests``.

The OpenTelemetry OTLP/HTTP exporter sends through a ``requests.Session``; :func:`guarded_session`
gives it one whose connections resolve the host, check every address with the same rules and
allowance as the provider calls, and connect to a checked address (TLS still verifies the
certificate against the host name). No proxy or credentials from the environment (``trust_env``
off): the address checked is the address connected to.

Pure Python (no Django); imported only where ``requests`` is installed (the ``otel`` extra).
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any, NoReturn

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import NewConnectionError
from urllib3.util import connection

from runs.providers import egress


def _connect(conn: HTTPConnection, allow: tuple[str, ...]) -> socket.socket:
    try:
        addresses = egress.checked_addresses(conn._dns_host, conn.port, allow)
    except egress.EgressRefused as exc:
        raise NewConnectionError(conn, f"{exc.code}: {exc.message}") from exc
    last: OSError | None = None
    for address in addresses:
        try:
            return connection.create_connection(
                (address, conn.port),
                conn.timeout,
                source_address=conn.source_address,
                socket_options=conn.socket_options,
            )
        except OSError as exc:  # try the next checked address
            last = exc
    raise NewConnectionError(conn, f"Failed to establish a new connection: {last}") from last


def _pools(allow: tuple[str, ...]) -> dict[str, type[HTTPConnectionPool]]:
    class GuardedHTTPConnection(HTTPConnection):
        def _new_conn(self) -> socket.socket:
            return _connect(self, allow)

    class GuardedHTTPSConnection(HTTPSConnection):
        def _new_conn(self) -> socket.socket:
            return _connect(self, allow)

    class GuardedHTTPPool(HTTPConnectionPool):
        ConnectionCls = GuardedHTTPConnection

    class GuardedHTTPSPool(HTTPSConnectionPool):
        ConnectionCls = GuardedHTTPSConnection

    return {"http": GuardedHTTPPool, "https": GuardedHTTPSPool}


class GuardedAdapter(HTTPAdapter):
    """requests' adapter whose connection pools connect only to checked addresses."""

    def __init__(self, allow: Sequence[str]) -> None:
        self.allow = tuple(allow)
        super().__init__(max_retries=0)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _pools(self.allow)

    def proxy_manager_for(self, *args: Any, **kwargs: Any) -> NoReturn:  # pragma: no cover - trust_env is off
        raise egress.EgressRefused(egress.URL_NOT_ALLOWED, "outbound requests do not go through a proxy")


def guarded_session(allow: Sequence[str]) -> requests.Session:
    """A session for outbound requests under the egress guard (see the module docstring)."""
    session = requests.Session()
    session.trust_env = False
    adapter = GuardedAdapter(allow)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
