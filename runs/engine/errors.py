"""The engine's error: a protocol error code plus a message that says what waits for what."""

from __future__ import annotations

from runs.protocol.errors import ErrorCode, ProtocolError

__all__ = ["EngineError", "ErrorCode"]


class EngineError(ProtocolError):
    """A command the engine refuses; nothing was emitted.

    ``code`` is one of the protocol's error codes (``INVALID_STATE_TRANSITION``,
    ``UNKNOWN_STEP``, ``IDEMPOTENCY_CONFLICT`` ...), ``message`` is meant for people
    (``step "draft" cannot start: waiting for predecessor "intake" (running)``) and
    ``path`` optionally names the offending input field.
    """

    def __init__(self, code: str, message: str, path: str = "") -> None:
        super().__init__(code, message, path)

    @classmethod
    def from_protocol(cls, exc: ProtocolError, *, path_prefix: str = "") -> EngineError:
        path = exc.path
        if path_prefix:
            path = f"{path_prefix}.{path}" if path and not path.startswith("[") else f"{path_prefix}{path}"
        return cls(exc.code, exc.message, path)

    def __repr__(self) -> str:
        return f"EngineError(code={self.code!r}, path={self.path!r}, message={self.message!r})"
