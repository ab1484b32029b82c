"""Where an outbound request may go: http(s) only, and only to addresses the operator allows.

One guard for every request the server makes on its own (playground providers, OTLP export,
webhooks when they exist). A destination is either typed by a workspace member (a provider's base
URL entered in the playground settings) or configured by the operator (a global provider, the
OTLP collector). Public (globally routable) addresses are always fine. Loopback, private ranges,
link-local (the cloud metadata address 169.254.169.254 among them), CGNAT, multicast, reserved
and unspecified addresses are refused unless the operator allows them (setting
``WORKBENCH_EGRESS_ALLOW``, read by :func:`allowance`; ``PLAYGROUND_EGRESS_ALLOW`` is an alias):
networks, optionally one port (``127.0.0.1:11434`` lets workspaces use a local Ollama without
opening the server's other loopback ports). In the embedded profile (one person's machine) the
operator's own destinations may also reach loopback, so a local model or collector configured by
the operator works without a setting; a member's destination never does without the allowance.

An IPv6 address that carries an IPv4 address (IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible
``::a.b.c.d``, NAT64 ``64:ff9b::/96`` and ``64:ff9b:1::/48``, 6to4 ``2002::/16``, Teredo
``2001::/32``) is judged by the IPv4 address it leads to as well as by itself.

The check happens when the connection is made, not only when the URL is saved: the HTTP client
of every provider call uses :class:`GuardedTransport`, whose network backend resolves the host
itself, checks *every* address it resolves to, and connects to one of those checked addresses
(TLS still verifies the certificate against the host name). A name that answers a public
address to one lookup and 127.0.0.1 to the next (DNS rebinding) therefore gains nothing: the
address connected to is the address checked. OTLP export (the OpenTelemetry SDK speaks
``requests``) gets the same check from ``runs.providers.egress_requests``.

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
Rule = tuple[Network, int | None]  # a network, and the one port allowed there (None: any)

SETTING = "WORKBENCH_EGRESS_ALLOW"
LOOPBACK = ("127.0.0.0/8", "::1/128")

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


def split_rule(item: str) -> tuple[str, int | None]:
    """``"127.0.0.1:11434"`` -> ("127.0.0.1", 11434); ``"[::1]:80"``, ``"10.0.0.0/8"``, ``"::1"``
    (an IPv6 network with a port is written in brackets). ValueError for a bad port."""
    item = item.strip()
    if item.startswith("["):
        inner, _, rest = item[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise ValueError(f"{item!r}: expected [address]:port")
        return inner, (_port(rest[1:], item) if rest else None)
    if item.count(":") == 1:
        host, _, port = item.partition(":")
        return host, _port(port, item)
    return item, None


def _port(text: str, item: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{item!r}: the port must be a number from 1 to 65535")
    return int(text)


@lru_cache(maxsize=32)
def parse_rules(allow: tuple[str, ...]) -> tuple[Rule, ...]:
    """``("127.0.0.0/8", "[::1]:11434")`` -> rules; a bad entry is a configuration error (ValueError)."""
    rules: list[Rule] = []
    for item in allow:
        if item.strip():
            network, port = split_rule(item)
            rules.append((ipaddress.ip_network(network, strict=False), port))
    return tuple(rules)


def allowance(configured: Sequence[str], *, operator: bool, embedded: bool) -> tuple[str, ...]:
    """What a request may reach beyond public addresses: the operator's allowance (the setting
    ``WORKBENCH_EGRESS_ALLOW``) for every request; in the embedded profile also loopback when the
    operator configured the destination (a global provider, the OTLP collector), never when a
    workspace member typed it."""
    allow = tuple(configured)
    if operator and embedded:
        allow += LOOPBACK
    return allow


def settings_allowance(settings: object, *, operator: bool) -> tuple[str, ...]:
    """:func:`allowance` from a settings object (``django.conf.settings``: read, never imported)."""
    return allowance(
        getattr(settings, SETTING, ()) or (),
        operator=operator,
        embedded=bool(getattr(settings, "EMBEDDED_PROFILE", False)),
    )


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
    means = legacy_ipv4(host)
    if means is not None:
        raise EgressRefused(
            URL_NOT_ALLOWED,
            f"the host {host!r} is an IPv4 address written in an octal, hexadecimal or shortened form "
            f"(the system reads it as {means}): write the address as {means}",
        )
    return scheme, host, port or (443 if scheme == "https" else 80)


_NUMERIC_HOST = frozenset("0123456789abcdefxABCDEFX.")


def legacy_ipv4(host: str) -> str | None:
    """The IPv4 address a host name means to the system's resolver when it is a numeric form
    that is not the standard dotted quad (``0177.0.0.1``, ``0x7f.1``, ``2130706433``), or None.

    ``ipaddress`` refuses such forms, so they passed as host names, and ``getaddrinfo`` (like
    ``inet_aton``) then reads them as the address they spell: a destination nobody could see
    when the URL was saved."""
    if not host or not set(host) <= _NUMERIC_HOST or not any(ch.isdigit() for ch in host):
        return None
    try:
        packed = socket.inet_aton(host)
    except OSError:
        return None
    means = socket.inet_ntoa(packed)
    return None if means == host else means


_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_TEREDO = ipaddress.ip_network("2001::/32")


def _address(text: str) -> Address:
    address = ipaddress.ip_address(text.split("%", 1)[0])  # drop an IPv6 zone id
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _low32(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)


def destinations(address: Address) -> list[Address]:
    """The addresses a connection to ``address`` really leads to: itself, or, for an IPv6 address
    that carries an IPv4 one, that IPv4 address (and itself where the IPv6 form is special too).

    IPv4-mapped, IPv4-compatible (``::a.b.c.d``) and well-known NAT64 (``64:ff9b::/96``) are
    only other spellings of the IPv4 address. Local-use NAT64 (``64:ff9b:1::/48``, the IPv4
    address at bits 96-127 or, RFC 6052's /48 layout, bits 48-63 and 72-87), 6to4 and Teredo
    (server and client) are judged as themselves *and* by every IPv4 address they carry."""
    if isinstance(address, ipaddress.IPv4Address):
        return [address]
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    if address in _IPV4_COMPATIBLE and int(address) > 1:  # :: and ::1 are IPv6's own
        return [_low32(address)]
    if address in _NAT64:
        return [_low32(address)]
    if address in _NAT64_LOCAL:
        value = int(address)
        rfc6052_48 = ((value >> 64) & 0xFFFF) << 16 | ((value >> 40) & 0xFFFF)
        return [address, _low32(address), ipaddress.IPv4Address(rfc6052_48)]
    if address.sixtofour is not None:
        return [address, address.sixtofour]
    if address in _TEREDO and address.teredo is not None:
        server, client = address.teredo
        return [address, server, client]
    return [address]


def _allowed(address: Address, port: int | None, rules: tuple[Rule, ...]) -> bool:
    return any(address in network and (want is None or want == port) for network, want in rules)


def check_address(text: str, allow: Sequence[str] = (), port: int | None = None) -> Address:
    """The address when a request may go there: every address it leads to (see
    :func:`destinations`) is public (globally routable) or operator-allowed (for ``port``)."""
    try:
        address = _address(text)
    except ValueError:
        raise EgressRefused(ADDRESS_NOT_ALLOWED, f"{text!r} is not an IP address") from None
    rules = parse_rules(tuple(allow))
    for target in destinations(address):
        if _allowed(target, port, rules):
            continue
        if not target.is_global or target.is_multicast:
            leads = "" if target == address else f" (it leads to {target})"
            raise EgressRefused(
                ADDRESS_NOT_ALLOWED,
                f"the address {address}{leads} is in a loopback, private, link-local or reserved "
                "range; the server sends no request to such addresses unless the operator allows "
                f"them (setting {SETTING})",
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
        check_address(address, allow, port)
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

    def __init__(
        self,
        allow: Sequence[str],
        *,
        stop: Stop | None = None,
        tap: BodyTap | None = None,
        inner: httpcore2.NetworkBackend | None = None,
        limits: httpx2.Limits | None = None,
    ) -> None:
        """``inner``: the network backend that connects to a checked address (httpcore's sync
        one unless given); ``limits``: the pool's (10 connections, 5 kept alive unless given)."""
        super().__init__(trust_env=False)
        self.stop = stop
        self.tap = tap
        ssl_context = httpx2.create_ssl_context(trust_env=False)
        limits = limits or httpx2.Limits(
            max_connections=10, max_keepalive_connections=5, keepalive_expiry=5.0
        )
        # HTTPTransport keeps its pool in ``_pool`` and sends every request through it; the pool
        # is rebuilt with the guarded network backend (tests/playground/test_egress.py checks it).
        self._pool.close()
        self._pool = httpcore2.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=GuardedBackend(allow, inner, stop=stop),
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
