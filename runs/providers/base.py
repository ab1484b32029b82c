"""What every provider adapter returns: the assistant content in canonical form, usage, errors."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runs.providers.watch import excerpt

# The endpoint a provider kind uses when no base URL is configured.
DEFAULT_BASE_URLS = {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com/v1"}

# on_delta(kind, text): kind is "text", "thinking" or "tool_input"; text is the new piece only.
DeltaSink = Callable[[str, str], None]


_SDK_OPTIONS = frozenset({"extra_headers", "extra_query", "extra_body", "timeout"})


def sdk_arguments(method: Callable[..., Any], request: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for an SDK ``method`` that put exactly ``request`` on the wire.

    The SDKs name only some body fields as parameters, and which ones changes between
    releases (anthropic 2.x dropped ``temperature``, ``top_p`` and ``top_k`` from
    ``messages.stream``). Fields the method does not name travel in ``extra_body``, which the
    SDK merges into the JSON body unchanged, so the request composed is the request sent."""
    params = inspect.signature(method).parameters
    named = {k: v for k, v in request.items() if k in params and k not in _SDK_OPTIONS}
    extra = {k: v for k, v in request.items() if k not in named}
    if extra:
        named["extra_body"] = extra
    return named


@dataclass(frozen=True)
class ProviderSettings:
    kind: str  # "anthropic" | "openai"
    api_key: str | None = None
    base_url: str | None = None  # None: the provider's own endpoint
    timeout: float = 600.0
    max_retries: int = 2
    # Networks the operator allows beyond public addresses (CIDRs, e.g. "127.0.0.0/8"); see egress.
    egress_allow: tuple[str, ...] = ()

    @property
    def endpoint(self) -> str:
        """The base URL calls go to (always explicit: the SDKs never pick one from the environment)."""
        return self.base_url or DEFAULT_BASE_URLS.get(self.kind, "")


@dataclass
class Usage:
    """Token counts. ``input_tokens`` is the whole prompt (cache reads and writes included)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int | None = None
    # the part of ``cache_write_tokens`` written for an hour (Anthropic's 1 h cache), priced apart
    cache_write_1h_tokens: int = 0

    @property
    def uncached_input_tokens(self) -> int:
        return max(0, self.input_tokens - self.cache_read_tokens - self.cache_write_tokens)

    def to_protocol(self) -> dict[str, Any]:
        """The protocol's strict ``model_io.usage`` object."""
        out = {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "totalTokens": self.input_tokens + self.output_tokens,
            "cachedInputTokens": self.cache_read_tokens,
        }
        if self.reasoning_tokens is not None:
            out["reasoningTokens"] = self.reasoning_tokens
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cache_write_1h_tokens": self.cache_write_1h_tokens,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Usage:
        data = data or {}
        return cls(
            input_tokens=int(data.get("input_tokens") or 0),
            output_tokens=int(data.get("output_tokens") or 0),
            cache_read_tokens=int(data.get("cache_read_tokens") or 0),
            cache_write_tokens=int(data.get("cache_write_tokens") or 0),
            reasoning_tokens=data.get("reasoning_tokens"),
            cache_write_1h_tokens=int(data.get("cache_write_1h_tokens") or 0),
        )


@dataclass
class ProviderResult:
    content: list[dict[str, Any]]  # assistant content blocks in canonical (Anthropic) form, as returned
    text: str
    usage: Usage | None  # None: the provider did not report it (unknown, never zero)
    model: str
    stop_reason: str | None = None
    response_id: str | None = None
    thinking: str = ""
    citations: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # [{id, name, input}]
    raw: dict[str, Any] = field(default_factory=dict)  # the provider's final response object


# A provider's own words in an error (its message, its error type) are foreign text: whatever
# answered at the base URL wrote them, maybe an internal service's status page. They are kept only
# as a short excerpt on one line, control characters escaped (pages escape the markup).
MAX_MESSAGE_CHARS = 300
MAX_TYPE_CHARS = 80


def _bounded(text: object, limit: int) -> str:
    """``text`` as a short single-line excerpt (:func:`runs.providers.watch.excerpt`)."""
    return excerpt(str(text).encode("utf-8", "surrogatepass"), limit)


class ProviderError(Exception):
    """A failed provider call: ``code`` is ours (stable), ``provider_type`` and ``message`` the
    provider's own words (short excerpts: see :func:`_bounded`), ``status`` its HTTP status when
    there was one."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int | None = None,
        provider_type: str | None = None,
        retry_after: str | None = None,
        partial: ProviderResult | None = None,
    ) -> None:
        message = _bounded(message, MAX_MESSAGE_CHARS)
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.provider_type = _bounded(provider_type, MAX_TYPE_CHARS) if provider_type is not None else None
        self.retry_after = _bounded(retry_after, 40) if retry_after is not None else None
        self.partial = partial  # what arrived before a stream was cut (STREAM_CUT)

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "status": self.status,
            "provider_type": self.provider_type,
            "retry_after": self.retry_after,
        }


# Our codes for what the transport saw (the provider's own errors map through code_for).
STREAM_CUT = "STREAM_CUT"  # the stream ended without its final event: the answer is incomplete
BAD_RESPONSE = "PROVIDER_BAD_RESPONSE"  # a body that is not the event stream it should be
UNREACHABLE = "PROVIDER_UNREACHABLE"  # no answer began: refused, reset or closed before the headers
TIMEOUT = "TIMEOUT"


def unreachable() -> ProviderError:
    return ProviderError(UNREACHABLE, "could not reach the provider: the connection failed before any answer")


def timed_out() -> ProviderError:
    return ProviderError(TIMEOUT, "the provider did not answer in time")


def not_a_stream(status: int | None, content_type: str, excerpt: str) -> ProviderError:
    """A success status whose body holds no event at all (an HTML page from a proxy, say)."""
    kind = content_type.split(";")[0].strip() or "no content type"
    body = f": “{excerpt}”" if excerpt else " and an empty body"
    return ProviderError(
        BAD_RESPONSE,
        f"the provider answered HTTP {status or 200} with {kind} instead of an event stream{body}",
        status=status if status and status != 200 else None,
    )


def unreadable(excerpt: str, partial: ProviderResult | None = None) -> ProviderError:
    """An event of the stream that cannot be read (not JSON, or not the shape the SDK knows)."""
    body = f": “{excerpt}”" if excerpt else ""
    return ProviderError(
        BAD_RESPONSE, f"the provider's stream held an event that could not be read{body}", partial=partial
    )


def cut(why: str, partial: ProviderResult) -> ProviderError:
    """The stream ended before its final event; ``partial`` is what arrived."""
    arrived = len(partial.text)
    return ProviderError(
        STREAM_CUT,
        f"the answer is incomplete: {why}; {arrived} character{'s' if arrived != 1 else ''} of text arrived",
        partial=partial,
    )


def status_message(status: int, body: Any) -> str:
    """The words for an error status whose body carries no message of the provider's own."""
    text = body if isinstance(body, str) else ""
    return f"the provider answered HTTP {status}" + (f": “{_excerpt(text)}”" if text.strip() else "")


def _excerpt(text: str) -> str:
    return excerpt(text.encode())


_TYPE_CODES = {
    "rate_limit_error": "RATE_LIMITED",
    "rate_limit_exceeded": "RATE_LIMITED",
    "overloaded_error": "OVERLOADED",
    "authentication_error": "AUTHENTICATION_FAILED",
    "invalid_api_key": "AUTHENTICATION_FAILED",
    "permission_error": "PERMISSION_DENIED",
    "not_found_error": "NOT_FOUND",
    "model_not_found": "NOT_FOUND",
    "invalid_request_error": "INVALID_REQUEST",
    "request_too_large": "REQUEST_TOO_LARGE",
    "api_error": "PROVIDER_ERROR",
    "server_error": "PROVIDER_ERROR",
}


def code_for(status: int | None, provider_type: str | None) -> str:
    if status == 429:
        return "RATE_LIMITED"
    if status in (529, 503):
        return "OVERLOADED"
    if status == 401:
        return "AUTHENTICATION_FAILED"
    if status == 403:
        return "PERMISSION_DENIED"
    if status == 404:
        return "NOT_FOUND"
    if status == 413:
        return "REQUEST_TOO_LARGE"
    if provider_type and provider_type in _TYPE_CODES:
        return _TYPE_CODES[provider_type]
    if status is not None and 400 <= status < 500:
        return "INVALID_REQUEST"
    return "PROVIDER_ERROR"


def error_details(body: Any) -> tuple[str | None, str | None]:
    """(provider error type or code, message) from an error body of either provider."""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            kind = err.get("type")
            code = err.get("code")
            if isinstance(code, str) and kind in (None, "invalid_request_error", "requests", "server_error"):
                kind = code if code in _TYPE_CODES else kind
            return kind, err.get("message")
    return None, None
