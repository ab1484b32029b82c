"""Prompts fetched by label, cached, compiled: what a pipeline runs is the version a reviewer promoted.

    import workbench_sdk as wb

    prompt = wb.prompt("support/greeting", label="production")   # cached 60 s per (name, label)
    messages = prompt.compile(name="Ann")                          # a str, or a list of messages
    # model calls after compile() (in this context) record prompt name and version

The cache (:class:`PromptCache`): a fresh entry (younger than ``ttl``) is answered as it is; a
stale one is answered at once while it is fetched again in the background (stale-while-revalidate);
with no entry the fetch happens now. When the server cannot be reached and a version was fetched
before, that version is answered and a :class:`PromptFallbackWarning` says so (never silently);
with nothing cached the error is raised.
"""

from __future__ import annotations

import re
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench_sdk.client import WorkbenchAPIError, WorkbenchClient, WorkbenchTransportError
from workbench_sdk.observe import default_client
from workbench_sdk.prompt_context import PromptRef, active_prompt

DEFAULT_TTL = 60.0
VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.-]{0,99})\s*\}\}")  # as the server's


class PromptFallbackWarning(UserWarning):
    """The server could not be reached: a cached (possibly outdated) prompt version is used."""


def _fill(text: str, values: dict[str, Any]) -> str:
    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        return str(values[name]) if name in values else match.group(0)

    return VARIABLE.sub(sub, text)


@dataclass(frozen=True)
class Prompt:
    """One fetched version of a prompt."""

    name: str
    version: int
    type: str
    body: Any
    config: dict[str, Any] = field(default_factory=dict)
    labels: tuple[str, ...] = ()
    variables: tuple[str, ...] = ()

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> Prompt:
        return cls(
            name=str(doc["name"]),
            version=int(doc["version"]),
            type=str(doc.get("type", "text")),
            body=doc.get("body"),
            config=dict(doc.get("config") or {}),
            labels=tuple(doc.get("labels") or ()),
            variables=tuple(doc.get("variables") or ()),
        )

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"

    def compile(self, **values: Any) -> Any:
        """The body with ``{{name}}`` filled in (a str, or a list of ``{role, content}`` messages).
        Model calls made after it in this context record this prompt's name and version."""
        active_prompt.set(PromptRef(name=self.name, version=self.version))
        if isinstance(self.body, str):
            return _fill(self.body, values)
        if isinstance(self.body, list):
            return [
                {**m, "content": _fill(m["content"], values)}
                if isinstance(m, dict) and isinstance(m.get("content"), str)
                else m
                for m in self.body
            ]
        return self.body


@dataclass
class _Entry:
    prompt: Prompt
    fetched_at: float
    refreshing: bool = False


class PromptCache:
    """Prompt versions per (name, label, version), with a TTL, stale-while-revalidate and a
    fallback to the last version fetched when the server cannot be reached."""

    def __init__(
        self,
        client: WorkbenchClient | None = None,
        *,
        ttl: float = DEFAULT_TTL,
        background: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self.ttl = ttl
        self.background = background
        self._clock = clock
        self._entries: dict[tuple[str, str | None, int | None], _Entry] = {}
        self._lock = threading.Lock()

    @property
    def client(self) -> WorkbenchClient:
        return self._client or default_client()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def _fetch(self, key: tuple[str, str | None, int | None]) -> Prompt:
        name, label, version = key
        prompt = Prompt.from_doc(self.client.get_prompt(name, label=label, version=version))
        with self._lock:
            self._entries[key] = _Entry(prompt, self._clock())
        return prompt

    def _refresh(self, key: tuple[str, str | None, int | None], entry: _Entry) -> None:
        try:
            self._fetch(key)
        except WorkbenchAPIError as exc:
            _warn_fallback(entry.prompt, exc)
        finally:
            entry.refreshing = False

    def get(self, name: str, *, label: str | None = None, version: int | None = None) -> Prompt:
        key = (name, label, version)
        with self._lock:
            entry = self._entries.get(key)
            stale = entry is not None and self._clock() - entry.fetched_at >= self.ttl
            start = entry is not None and stale and self.background and not entry.refreshing
            if start and entry is not None:
                entry.refreshing = True
        if entry is None:
            return self._fetch(key)  # nothing cached: the error (server down, no such label) is raised
        if not stale:
            return entry.prompt
        if not self.background:
            try:
                return self._fetch(key)
            except WorkbenchAPIError as exc:
                _warn_fallback(entry.prompt, exc)
                return entry.prompt
        if start:
            threading.Thread(target=self._refresh, args=(key, entry), daemon=True).start()
        return entry.prompt


def _warn_fallback(prompt: Prompt, exc: WorkbenchAPIError) -> None:
    why = "the server cannot be reached" if isinstance(exc, WorkbenchTransportError) else f"{exc.code}"
    warnings.warn(
        f"workbench: using the cached prompt {prompt.ref} ({why}; it may be outdated)",
        PromptFallbackWarning,
        stacklevel=3,
    )


_default_cache: PromptCache | None = None


def default_cache() -> PromptCache:
    global _default_cache
    if _default_cache is None:
        _default_cache = PromptCache()
    return _default_cache


def prompt(
    name: str, *, label: str | None = None, version: int | None = None, cache: PromptCache | None = None
) -> Prompt:
    """The prompt version ``label`` points at (``production`` when neither is given), or the
    numbered ``version``, through the cache (see :class:`PromptCache`)."""
    return (cache or default_cache()).get(name, label=label, version=version)
