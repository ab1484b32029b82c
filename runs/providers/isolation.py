"""Clients of the official SDKs that carry nothing from the operator's environment.

The ``anthropic`` and ``openai`` clients read environment variables by themselves when they are
constructed: ``ANTHROPIC_CUSTOM_HEADERS`` / ``OPENAI_CUSTOM_HEADERS`` (extra headers, an
``Authorization`` among them), ``ANTHROPIC_AUTH_TOKEN``, ``OPENAI_ORG_ID``, ``OPENAI_PROJECT_ID``,
``OPENAI_ADMIN_KEY``, webhook secrets, base URLs, profiles and federation credentials. A workspace
names its own URL, so any of those would be sent to a server a user chose. The adapters pass every
value explicitly (key, base URL, an HTTP client that ignores proxy variables) and then
:func:`sealed` drops what the constructor merged in from the environment: the request carries the
workspace's configuration and the SDK's own protocol headers, nothing else.
"""

from __future__ import annotations

from typing import Any

from runs.providers import egress
from runs.providers.base import ProviderSettings
from runs.providers.watch import BodyTap, Stop

# The key sent where the workspace configured none (a local server): never empty ("Bearer " is not a
# valid header) and never None (the SDK would read its key from the environment).
NO_KEY = "no-key-required"

# Attributes the SDK constructors fill from the environment when the argument is None.
_FROM_ENVIRONMENT = (
    "auth_token",
    "organization",
    "project",
    "admin_api_key",
    "webhook_key",
    "webhook_secret",
)


def sealed[Client](client: Client) -> Client:
    """``client`` without what its constructor took from the environment (it sends only what we pass)."""
    state = vars(client)
    state["_custom_headers"] = {}  # *_CUSTOM_HEADERS; we pass no default headers of our own
    if "_credential_headers" in state:  # profile or federation credentials (anthropic)
        state["_credential_headers"] = {}
    if "_ambient_authorizations" in state:  # an Authorization from OPENAI_CUSTOM_HEADERS
        state["_ambient_authorizations"] = frozenset()
    for name in _FROM_ENVIRONMENT:
        if name in state:
            state[name] = None
    for name in ("credentials", "_token_cache", "_custom_auth"):  # a profile on disk (anthropic)
        if name in state:
            state[name] = None
    return client


def sdk_client(
    client_class: type,
    http_client_class: type,
    settings: ProviderSettings,
    *,
    stop: Stop | None = None,
    tap: BodyTap | None = None,
) -> Any:
    """An SDK client for ``settings``: every value explicit, calls through the egress guard, an
    HTTP client that ignores proxy variables, and nothing taken from the environment. ``stop``
    reaches the call's sockets (and refuses the SDK's retries); ``tap`` keeps the body's ends."""
    return sealed(
        client_class(
            api_key=settings.api_key or NO_KEY,
            base_url=settings.endpoint,
            timeout=settings.timeout,
            max_retries=settings.max_retries,
            http_client=http_client_class(
                transport=egress.GuardedTransport(settings.egress_allow, stop=stop, tap=tap), trust_env=False
            ),
        )
    )
