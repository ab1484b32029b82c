"""Error codes of protocol 1.0.0 and the exception that carries them.

Every failure the protocol layer reports is a :class:`ProtocolError` with one of the
reference runtime's error codes, the JSON path of the offending value
(``trace[3].usage.inputTokens``; ``""`` for the document root) and a human message.
"""

from __future__ import annotations


class ErrorCode:
    """The reference runtime's error codes (``WorkbenchError.code``), reused verbatim."""

    INVALID_JSON = "INVALID_JSON"
    INVALID_RUN_BUNDLE = "INVALID_RUN_BUNDLE"
    INVALID_RUN_STATE = "INVALID_RUN_STATE"
    INVALID_TRACE_EVENT = "INVALID_TRACE_EVENT"
    INTEGRITY_MISMATCH = "INTEGRITY_MISMATCH"
    MISSING_INTEGRITY = "MISSING_INTEGRITY"
    UNKNOWN_RUN = "UNKNOWN_RUN"
    UNKNOWN_STEP = "UNKNOWN_STEP"
    UNKNOWN_ARTIFACT = "UNKNOWN_ARTIFACT"
    UNKNOWN_RULESET = "UNKNOWN_RULESET"
    INVALID_WORKFLOW = "INVALID_WORKFLOW"
    INVALID_INPUT = "INVALID_INPUT"
    INVALID_STATE_TRANSITION = "INVALID_STATE_TRANSITION"
    IDEMPOTENCY_CONFLICT = "IDEMPOTENCY_CONFLICT"
    PATCH_FAILED = "PATCH_FAILED"
    RUN_ID_COLLISION = "RUN_ID_COLLISION"
    STORAGE_UNAVAILABLE = "STORAGE_UNAVAILABLE"
    UNSUPPORTED_PROTOCOL_VERSION = "UNSUPPORTED_PROTOCOL_VERSION"


ALL_ERROR_CODES: frozenset[str] = frozenset(
    value for name, value in vars(ErrorCode).items() if not name.startswith("_")
)


class ProtocolError(Exception):
    """A protocol failure: ``code`` (an :class:`ErrorCode` value), JSON ``path`` and ``message``."""

    def __init__(self, code: str, message: str, path: str = "") -> None:
        self.code = code
        self.path = path
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.path:
            return f"{self.code} at {self.path}: {self.message}"
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        return f"ProtocolError(code={self.code!r}, path={self.path!r}, message={self.message!r})"

    # keep pickling (multiprocessing, task queues) working
    def __reduce__(self) -> tuple[type[ProtocolError], tuple[str, str, str]]:
        return (type(self), (self.code, self.message, self.path))
