"""Writes to a workspace's playground configuration: providers, their keys, models, prices.

Every function takes the caller's membership and refuses anyone but an owner (the pages check
first; this is the second lock). Input is validated here, so every adapter gets the same
refusals: :class:`SettingsError` carries a stable ``code`` and a message for people, and
nothing is written when it is raised.

- A workspace provider never names a server environment variable: its key is typed in,
  stored encrypted (playground.keys), and only a hint is ever shown again.
- A base URL is http(s) with a host and no credentials; when its host resolves now, every
  address must be allowed (the connection checks again at call time, see providers.egress).
- Prices are finite, non-negative decimals that fit the price table; context windows are
  bounded; currencies are 3 to 8 letters. Values that would break later pages never get in.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any, TypedDict, Unpack

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction

from playground.models import ModelEntry, OperationDefaults, ProviderConfig, ProviderKind, WorkspacePlayground
from playground.operations import OPERATIONS
from runs.models import Membership, Role
from runs.providers import egress

MAX_CONTEXT_WINDOW = 100_000_000
MAX_PRICE = Decimal("999999.999999")  # the price columns: 12 digits, 6 decimals
MAX_KEY_LENGTH = 1000
MAX_TOKENS_PARAMS = ("max_tokens", "max_completion_tokens")
_CURRENCY = re.compile(r"[A-Z]{3,8}")
_KEY_CHARS = re.compile(r"[\x21-\x7e]+")  # printable ASCII: what an HTTP header can carry


class SettingsError(ValueError):
    def __init__(self, code: str, message: str, field: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field

    def __str__(self) -> str:
        return f"{self.message} ({self.code})"


def _require_owner(membership: Membership | None) -> Membership:
    if membership is None or not membership.has_role(Role.OWNER):
        raise PermissionDenied("managing providers, keys, models and prices needs the owner role")
    return membership


def _text(value: object, field: str, *, max_length: int, required: bool = True) -> str:
    text = value.strip() if isinstance(value, str) else ""
    if required and not text:
        raise SettingsError("INVALID_INPUT", f"{field} is required", field)
    if len(text) > max_length:
        raise SettingsError("INVALID_INPUT", f"{field} is longer than {max_length} characters", field)
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F or 0xD800 <= ord(ch) <= 0xDFFF for ch in text):
        raise SettingsError("INVALID_INPUT", f"{field} contains control characters", field)
    return text


def validate_base_url(url: str) -> str:
    """'' (the provider's own endpoint) or an acceptable base URL; SettingsError otherwise."""
    url = url.strip()
    if not url:
        return ""
    limit = ProviderConfig._meta.get_field("base_url").max_length
    if limit is not None and len(url) > limit:
        raise SettingsError(egress.URL_NOT_ALLOWED, "the base URL is too long", "base_url")
    allow = egress.settings_allowance(settings, operator=False)  # a workspace owner typed it
    try:
        _, host, port = egress.check_url(url)
        egress.checked_addresses(host, port, allow)
    except egress.EgressRefused as exc:
        if exc.code != egress.HOST_NOT_FOUND:  # a name that does not resolve yet is checked at call time
            raise SettingsError(exc.code, exc.message, "base_url") from None
    return url.rstrip("/")


def validate_api_key(value: object) -> str:
    key = value.strip() if isinstance(value, str) else ""
    if not key:
        return ""
    if len(key) > MAX_KEY_LENGTH or not _KEY_CHARS.fullmatch(key):
        raise SettingsError(
            "INVALID_API_KEY",
            "an API key is printable ASCII without spaces, at most 1000 characters",
            "api_key",
        )
    return key


def do_add_provider(
    *,
    membership: Membership,
    name: str,
    kind: str,
    base_url: str = "",
    api_key: str = "",
    key_required: bool = True,
    api_key_env: str = "",
) -> ProviderConfig:
    workspace = _require_owner(membership).workspace
    if api_key_env:
        raise SettingsError(
            "KEY_ENV_NOT_ALLOWED",
            "a workspace provider cannot read a server environment variable: enter its API key",
            "api_key_env",
        )
    if kind not in ProviderKind.values:
        raise SettingsError(
            "INVALID_INPUT", "choose Anthropic or OpenAI (also for OpenAI-compatible servers)", "kind"
        )
    name = _text(name, "the provider's name", max_length=100)
    url = validate_base_url(base_url or "")
    key = validate_api_key(api_key)
    with transaction.atomic():
        if ProviderConfig.objects.filter(workspace=workspace, name=name).exists():
            raise SettingsError("DUPLICATE_NAME", "a provider with that name exists", "name")
        provider = ProviderConfig(
            workspace=workspace, name=name, kind=kind, base_url=url, key_required=bool(key_required)
        )
        provider.set_api_key(key)
        provider.save()
    return provider


def _own_provider(workspace, provider_pk: object) -> ProviderConfig:
    pk = parse_pk(provider_pk)
    provider = ProviderConfig.objects.filter(workspace=workspace, pk=pk).first() if pk else None
    if provider is None:
        raise SettingsError("UNKNOWN_PROVIDER", "no such provider in this workspace", "provider")
    return provider


def do_set_provider_key(*, membership: Membership, provider_pk: object, api_key: str) -> ProviderConfig:
    """Replace (or, with an empty key, remove) the stored key of one of the workspace's providers."""
    workspace = _require_owner(membership).workspace
    provider = _own_provider(workspace, provider_pk)
    provider.set_api_key(validate_api_key(api_key))
    provider.save(update_fields=["api_key_encrypted", "api_key_hint", "updated_at"])
    return provider


def _bounded(value: object, name: str, low: float, high: float, kind: type) -> float:
    text = value.strip() if isinstance(value, str) else ""
    try:
        number = kind(text)
    except ValueError:
        raise SettingsError(
            "INVALID_INPUT", f"the {name} must be a number between {low:g} and {high:g}", name
        ) from None
    if not low <= number <= high:  # NaN fails this too
        raise SettingsError("INVALID_INPUT", f"the {name} must be between {low:g} and {high:g}", name)
    return number


def do_set_provider_limits(
    *, membership: Membership, provider_pk: object, timeout_seconds: object, max_retries: object
) -> ProviderConfig:
    """Timeout (1 to 3600 s) and retries (0 to 10) of one of the workspace's own providers."""
    workspace = _require_owner(membership).workspace
    provider = _own_provider(workspace, provider_pk)
    provider.timeout_seconds = _bounded(timeout_seconds, "timeout", 1, 3600, float)
    provider.max_retries = int(_bounded(max_retries, "retries", 0, 10, int))
    provider.save(update_fields=["timeout_seconds", "max_retries", "updated_at"])
    return provider


def parse_pk(value: object) -> int | None:
    """A database id from form input; None for anything that is not a small positive integer."""
    text = str(value).strip() if value is not None else ""
    if not text.isascii() or not text.isdigit() or len(text) > 18:
        return None
    number = int(text)
    return number if number > 0 else None


def parse_context_window(value: object) -> int | None:
    text = value.strip() if isinstance(value, str) else ""
    if not text:
        return None
    if not text.isascii() or not text.isdigit() or len(text) > 12 or not 1 <= int(text) <= MAX_CONTEXT_WINDOW:
        raise SettingsError(
            "INVALID_INPUT",
            f"the context window is a whole number of tokens, 1 to {MAX_CONTEXT_WINDOW:,}",
            "context_window",
        )
    return int(text)


def parse_price(value: object, field: str = "price") -> Decimal | None:
    text = value.strip() if isinstance(value, str) else ""
    if not text:
        return None
    if len(text) > 40:
        raise SettingsError("INVALID_PRICE", f"{text[:40]!r}… is not a price", field)
    try:
        price = Decimal(text)
    except InvalidOperation:
        raise SettingsError("INVALID_PRICE", f"{text!r} is not a price", field) from None
    if not price.is_finite():
        raise SettingsError("INVALID_PRICE", "a price is a finite number (not NaN or Infinity)", field)
    if price < 0:
        raise SettingsError("INVALID_PRICE", "prices cannot be negative", field)
    if price > MAX_PRICE:
        raise SettingsError("INVALID_PRICE", f"a price per million tokens is at most {MAX_PRICE}", field)
    return price.quantize(Decimal("0.000001"))


def parse_currency(value: object) -> str:
    text = (value.strip().upper() if isinstance(value, str) else "") or "USD"
    if not _CURRENCY.fullmatch(text):
        raise SettingsError(
            "INVALID_INPUT", "a currency is a code of 3 to 8 letters, such as USD", "currency"
        )
    return text


class ModelFields(TypedDict, total=False):
    """What the add-model and edit-model forms send (as text and check boxes)."""

    model_id: str
    display_name: str
    context_window: str
    supports_thinking: bool
    supports_citations: bool
    supports_pdf: bool
    max_tokens_param: str


def _model_values(fields: ModelFields, provider_kind: str) -> dict[str, Any]:
    """A model entry's columns from the form's fields, checked (adding and editing share it)."""
    model_id = _text(
        fields.get("model_id", ""), "the model id (the name the API knows the model by)", max_length=200
    )
    display = _text(fields.get("display_name", ""), "the display name", max_length=200, required=False)
    param = fields.get("max_tokens_param") or "max_tokens"
    if param not in MAX_TOKENS_PARAMS:
        raise SettingsError(
            "INVALID_INPUT", "the max tokens parameter is max_tokens or max_completion_tokens"
        )
    return {
        "model_id": model_id,
        "display_name": display or model_id,
        "context_window": parse_context_window(fields.get("context_window", "")),
        "supports_thinking": bool(fields.get("supports_thinking")),
        "supports_citations": bool(fields.get("supports_citations"))
        and provider_kind == ProviderKind.ANTHROPIC,
        "supports_pdf": bool(fields.get("supports_pdf")),
        "max_tokens_param": param,
    }


def do_add_model(*, membership: Membership, provider_pk: object, **fields: Unpack[ModelFields]) -> ModelEntry:
    workspace = _require_owner(membership).workspace
    pk = parse_pk(provider_pk)
    provider = ProviderConfig.objects.visible_to(workspace).filter(pk=pk).first() if pk else None
    if provider is None:
        raise SettingsError("UNKNOWN_PROVIDER", "choose a provider", "provider")
    values = _model_values(fields, provider.kind)
    return ModelEntry.objects.create(workspace=workspace, provider=provider, **values)


def do_set_prices(*, membership: Membership, prices: dict[int, dict[str, str]]) -> int:
    """``{model pk: {input, output, cache_read, cache_write, cache_write_1h, currency}}`` for the workspace's own
    models; all rows are checked before any is written. Returns how many rows changed."""
    workspace = _require_owner(membership).workspace
    entries = {e.pk: e for e in ModelEntry.objects.filter(workspace=workspace, pk__in=list(prices))}
    for pk, row in prices.items():
        entry = entries.get(pk)
        if entry is None:
            continue
        label = entry.display_name
        entry.input_price = parse_price(row.get("input"), f"input price of {label}")
        entry.output_price = parse_price(row.get("output"), f"output price of {label}")
        entry.cache_read_price = parse_price(row.get("cache_read"), f"cache read price of {label}")
        entry.cache_write_price = parse_price(row.get("cache_write"), f"cache write price of {label}")
        entry.cache_write_1h_price = parse_price(
            row.get("cache_write_1h"), f"1 h cache write price of {label}"
        )
        entry.currency = parse_currency(row.get("currency"))
    with transaction.atomic():
        for entry in entries.values():
            entry.save()
    return len(entries)


def do_set_default_model(*, membership: Membership, model_pk: object) -> ModelEntry | None:
    workspace = _require_owner(membership).workspace
    pk = parse_pk(model_pk)
    entry = ModelEntry.objects.visible_to(workspace).filter(pk=pk).first() if pk else None
    if pk is not None and entry is None:
        raise SettingsError("UNKNOWN_MODEL", "no such model in this workspace", "model")
    prefs, _ = WorkspacePlayground.objects.get_or_create(workspace=workspace)
    prefs.default_model = entry
    prefs.save()
    return entry


# --------------------------------------------------------------------------------------------
# Editing, disabling and deleting (the workspace's own rows; global ones can only be hidden)


def do_edit_provider(
    *, membership: Membership, provider_pk: object, name: str, base_url: str, key_required: bool
) -> ProviderConfig:
    workspace = _require_owner(membership).workspace
    provider = _own_provider(workspace, provider_pk)
    name = _text(name, "the provider's name", max_length=100)
    url = validate_base_url(base_url or "")
    with transaction.atomic():
        if ProviderConfig.objects.filter(workspace=workspace, name=name).exclude(pk=provider.pk).exists():
            raise SettingsError("DUPLICATE_NAME", "a provider with that name exists", "name")
        provider.name, provider.base_url, provider.key_required = name, url, bool(key_required)
        provider.save(update_fields=["name", "base_url", "key_required", "updated_at"])
    return provider


def do_set_provider_enabled(*, membership: Membership, provider_pk: object, enabled: bool) -> ProviderConfig:
    """A disabled provider keeps its key and models but answers nothing until enabled again."""
    workspace = _require_owner(membership).workspace
    provider = _own_provider(workspace, provider_pk)
    provider.is_enabled = bool(enabled)
    provider.save(update_fields=["is_enabled", "updated_at"])
    return provider


def do_delete_provider(*, membership: Membership, provider_pk: object) -> None:
    """Delete one of the workspace's providers with its key and its models (recorded executions
    and runs stay; they keep the model's name)."""
    workspace = _require_owner(membership).workspace
    provider = _own_provider(workspace, provider_pk)
    with transaction.atomic():
        provider.delete()


def _visible_model(workspace, model_pk: object) -> ModelEntry:
    pk = parse_pk(model_pk)
    entry = ModelEntry.objects.visible_to(workspace).filter(pk=pk).first() if pk else None
    if entry is None:
        raise SettingsError("UNKNOWN_MODEL", "no such model in this workspace", "model")
    return entry


def _own_model(workspace, model_pk: object) -> ModelEntry:
    entry = _visible_model(workspace, model_pk)
    if entry.workspace_id != workspace.pk:
        raise SettingsError(
            "GLOBAL_MODEL",
            "a global model cannot be changed here: hide it for this workspace instead",
            "model",
        )
    return entry


def do_edit_model(*, membership: Membership, model_pk: object, **fields: Unpack[ModelFields]) -> ModelEntry:
    workspace = _require_owner(membership).workspace
    entry = _own_model(workspace, model_pk)
    for name, value in _model_values(fields, entry.provider.kind).items():
        setattr(entry, name, value)
    entry.save()
    return entry


def do_set_model_enabled(*, membership: Membership, model_pk: object, enabled: bool) -> ModelEntry:
    """The workspace's own model: active or not. A global model: shown or hidden here."""
    workspace = _require_owner(membership).workspace
    entry = _visible_model(workspace, model_pk)
    if entry.workspace_id == workspace.pk:
        entry.is_active = bool(enabled)
        entry.save(update_fields=["is_active"])
    else:
        prefs, _ = WorkspacePlayground.objects.get_or_create(workspace=workspace)
        if enabled:
            prefs.hidden_models.remove(entry)
        else:
            prefs.hidden_models.add(entry)
    return entry


def do_delete_model(*, membership: Membership, model_pk: object) -> None:
    workspace = _require_owner(membership).workspace
    entry = _own_model(workspace, model_pk)
    entry.delete()


MAX_TEMPERATURE = 1.0  # the page's slider (and Anthropic's range)
TRISTATE = {"": None, "on": True, "off": False}


def do_set_operation_defaults(
    *,
    membership: Membership | None,
    operation_type: object,
    temperature: object,
    thinking: object,
    citations: object,
) -> OperationDefaults | None:
    """The workspace's defaults for one operation type (empty values: not set here, the global
    default or the model's own applies). Owners only; the row goes when nothing is set."""
    membership = _require_owner(membership)
    if operation_type not in OPERATIONS:
        raise SettingsError("INVALID_INPUT", "unknown operation type", "operation_type")
    temp_text = temperature.strip() if isinstance(temperature, str) else ""
    value: float | None = None
    if temp_text:
        try:
            value = float(temp_text)
        except ValueError:
            raise SettingsError(
                "INVALID_INPUT", "temperature is a number from 0 to 1", "temperature"
            ) from None
        if not 0.0 <= value <= MAX_TEMPERATURE:
            raise SettingsError("INVALID_INPUT", "temperature is a number from 0 to 1", "temperature")
    if thinking not in TRISTATE or citations not in TRISTATE:
        raise SettingsError("INVALID_INPUT", "thinking and citations are on, off or not set", "thinking")
    fields = {"temperature": value, "thinking": TRISTATE[thinking], "citations": TRISTATE[citations]}
    if all(v is None for v in fields.values()):
        OperationDefaults.objects.filter(
            workspace=membership.workspace, operation_type=operation_type
        ).delete()
        return None
    row, _ = OperationDefaults.objects.update_or_create(
        workspace=membership.workspace, operation_type=operation_type, defaults=fields
    )
    return row
