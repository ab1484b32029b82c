"""Provider adapters: the composed request goes to the provider through its official SDK."""

from __future__ import annotations

from typing import Any

from runs.providers import egress
from runs.providers.base import DeltaSink, ProviderError, ProviderResult, ProviderSettings, Usage
from runs.providers.watch import Stop, StopRequested


def check_destination(settings: ProviderSettings) -> None:
    """Refuse (ProviderError with the egress code) a call whose endpoint may not be reached now.

    The connection itself checks again (see egress.GuardedTransport): this early check only
    gives a clear error before the SDK, which would otherwise retry a refused connection."""
    try:
        egress.check_destination(settings.endpoint, settings.egress_allow)
    except egress.EgressRefused as exc:
        raise ProviderError(exc.code, exc.message) from None


def call(
    settings: ProviderSettings, request: dict[str, Any], on_delta: DeltaSink, *, stop: Stop | None = None
) -> ProviderResult:
    """Send ``request`` (a composed body) and stream deltas to ``on_delta``; raises ProviderError
    (every failure has a code in words and a message for people, never an exception's own text),
    or StopRequested once ``stop`` is set: nothing more is sent, its connection is shut."""
    check_destination(settings)
    try:
        if settings.kind == "anthropic":
            from runs.providers import anthropic as anthropic_provider

            return anthropic_provider.call(settings, request, on_delta, stop=stop)
        if settings.kind == "openai":
            from runs.providers import openai as openai_provider

            return openai_provider.call(settings, request, on_delta, stop=stop)
    except egress.EgressRefused as exc:  # refused when connecting (an SDK may pass it through)
        raise ProviderError(exc.code, exc.message) from None
    raise ProviderError("NO_PROVIDER", f"unknown provider kind {settings.kind!r}")


def wire_request(kind: str, request: dict[str, Any]) -> dict[str, Any]:
    """What goes over the wire, as recorded in the run's model_io request event."""
    if kind == "anthropic":
        from runs.providers import anthropic as anthropic_provider

        return anthropic_provider.wire_request(request)
    from runs.providers import openai as openai_provider

    return openai_provider.wire_request(request)


__all__ = [
    "DeltaSink",
    "ProviderError",
    "ProviderResult",
    "ProviderSettings",
    "Stop",
    "StopRequested",
    "Usage",
    "call",
    "wire_request",
]
