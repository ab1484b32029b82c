"""Where a provider call may go: http(s) only, and only to addresses the operator allows.

A base URL is typed by a workspace owner, so it must never reach the server's own network:
loopback, private ranges, link-local (the cloud metadata address 169.254.169.254 among them),
CGNAT, multicast, reserved and unspecified addresses are refused, unless an operator network
allowance covers them (``ProviderSettings.egress_allow``, from the setting
``PLAYGROUND_EGRESS_ALLOW``; the embedded profile allows loopback so a local Ollama or
llama.cpp server works).

The check happens when the connection is made, not only when the URL is saved: the HTTP client
of every provider call uses :class:`GuardedTransport`, whose network backend resolves the host
itself, checks *every* address it resolves to, and connects to one of those checked addresses
(TLS still verifies the certificate against the host name). A name that answers a public
address to one lookup and 127.0.0.1 to the next (DNS rebinding) therefore gains nothing: the
address connected to is the address checked.

Pure Python (no Django): callers pass the allowance in.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import cast
from urllib.parse import urlsplit

import httpcore2
import httpx2

from runs.providers.watch import BodyTap, Stop, StoppableStream, TappedStream

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

MAX_URL_LENGTH = 2000

# Error codes, shown to the user with a message saying what was refused.
URL_NOT_ALLOWED = "URL_NOT_ALLOWED"
ADDRESS_NOT_ALLOWED = "ADDRESS_NOT_ALLOWED"
HOST_NOT_FOUND = "HOST_NOT_FOUND"


class EgressRefused(Exception):
    """A call that may not be made; ``code`` is one of the constants above."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@lru_cache(maxsize=32)
def parse_networks(allow: tuple[str, ...]) -> tuple[Network, ...]:
    """``("127.0.0.0/8", "::1")`` -> networks; a bad entry is a configuration error (ValueError)."""
    return tuple(ipaddress.ip_network(item.strip(), strict=False) for item in allow if item.strip())


def check_url(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a base URL that has an acceptable shape; EgressRefused otherwise.

    Only the shape is checked here (scheme, host, no credentials, no control characters); the
    addresses are checked when the connection is made."""
    if not isinstance(url, str) or not url:
        raise EgressRefused(URL_NOT_ALLOWED, "the base URL is empty")
    if len(url) > MAX_URL_LENGTH:
        raise EgressRefused(URL_NOT_ALLOWED, f"the base URL is longer than {MAX_URL_LENGTH} characters")
    if any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in url):
        raise EgressRefused(URL_NOT_ALLOWED, "the base URL contains spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise EgressRefused(URL_NOT_ALLOWED, f"the base URL is malformed ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise EgressRefused(URL_NOT_ALLOWED, "the base URL must start with http:// or https://")
    if parts.username is not None or parts.password is not None:
        raise EgressRefused(URL_NOT_ALLOWED, "the base URL may not carry a user name or password")
    host = parts.hostname
    if not host:
        raise EgressRefused(URL_NOT_ALLOWED, "the base URL has no host")
    if parts.fragment:
        raise EgressRefused(URL_NOT_ALLOWED, "the base URL may not have a #fragment")
    return scheme, host, port or (443 if scheme == "https" else 80)


def _address(text: str) -> Address:
    address = ipaddress.ip_address(text.split("%", 1)[0])  # drop an IPv6 zone id
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def check_address(text: str, allow: Sequence[str] = ()) -> Address:
    """The address when a call may go there: public (globally routable) or operator-allowed."""
    try:
        address = _address(text)
    except ValueError:
        raise EgressRefused(ADDRESS_NOT_ALLOWED, f"{text!r} is not an IP address") from None
    if any(address in network for network in parse_networks(tuple(allow))):
        return address
    if not address.is_global or address.is_multicast:
        raise EgressRefused(
            ADDRESS_NOT_ALLOWED,
            f"the provider's address {address} is in a loopback, private, link-local or reserved "
            "range; the server does not call such addresses unless the operator allows them "
            "(setting PLAYGROUND_EGRESS_ALLOW)",
        )
    return address


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (IP literals, decimal or hex forms included)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise EgressRefused(
            HOST_NOT_FOUND, f"the provider's host {host!r} cannot be resolved ({exc})"
        ) from None
    seen: list[str] = []
    for *_, sockaddr in infos:
        address = sockaddr[0]  # an IP address (an int only for families a stream lookup never gives)
        if isinstance(address, str) and address not in seen:
            seen.append(address)
    if not seen:
        raise EgressRefused(HOST_NOT_FOUND, f"the provider's host {host!r} has no address")
    return seen


def checked_addresses(host: str, port: int, allow: Sequence[str] = ()) -> list[str]:
    """Resolve ``host`` and check every address; refuse when any one of them is not allowed."""
    addresses = resolve(host, port)
    for address in addresses:
        check_address(address, allow)
    return addresses


def check_destination(url: str, allow: Sequence[str] = ()) -> list[str]:
    """Shape and addresses of ``url``, checked now (the connection checks again)."""
    _, host, port = check_url(url)
    return checked_addresses(host, port, allow)


class GuardedBackend(httpcore2.NetworkBackend):
    """Resolves, checks every address, and connects to a checked address, never to the name."""

    def __init__(
        self, allow: Sequence[str], inner: httpcore2.NetworkBackend | None = None, *, stop: Stop | None = None
    ) -> None:
        self.allow = tuple(allow)
        self.inner = inner or httpcore2.SyncBackend()
        self.stop = stop

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.NetworkStream:
        last: Exception | None = None
        for address in checked_addresses(host, port, self.allow):
            if self.stop is not None:
                self.stop.check()
            try:
                stream = self.inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except httpcore2.ConnectError as exc:  # try the next checked address
                last = exc
                continue
            return stream if self.stop is None else StoppableStream(stream, self.stop)
        assert last is not None
        raise last

    def connect_unix_socket(  # pragma: no cover - never used for providers
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.NetworkStream:
        raise EgressRefused(URL_NOT_ALLOWED, "unix sockets are not provider endpoints")

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


class GuardedTransport(httpx2.HTTPTransport):
    """httpx2's transport with the connection pool built on :class:`GuardedBackend`; no proxy
    from the environment (``trust_env`` off), so the checked address is the one connected to."""

    def __init__(self, allow: Sequence[str], *, stop: Stop | None = None, tap: BodyTap | None = None) -> None:
        super().__init__(trust_env=False)
        self.stop = stop
        self.tap = tap
        ssl_context = httpx2.create_ssl_context(trust_env=False)
        limits = httpx2.Limits(max_connections=10, max_keepalive_connections=5, keepalive_expiry=5.0)
        # HTTPTransport keeps its pool in ``_pool`` and sends every request through it; the pool
        # is rebuilt with the guarded network backend (tests/playground/test_egress.py checks it).
        self._pool.close()
        self._pool = httpcore2.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=GuardedBackend(allow, stop=stop),
        )

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        """Nothing is sent once Stop was pressed (an SDK retry included); the body is tapped."""
        if self.stop is not None:
            self.stop.check()
        response = super().handle_request(request)
        if self.tap is not None:
            self.tap.begin(response)
            sync_stream = cast(httpx2.SyncByteStream, response.stream)  # a sync transport's answer
            response.stream = TappedStream(sync_stream, self.tap)
        return response


def refusal_in(exc: BaseException | None) -> EgressRefused | None:
    """The EgressRefused behind an SDK connection error, if that is what it was."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, EgressRefused):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None
