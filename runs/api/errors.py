"""API errors: every failure is ``{"error": message, "code": CODE}`` with a fitting status."""

from __future__ import annotations

from runs.protocol.errors import ErrorCode

# Codes the API adds to the protocol's own.
CONFLICT = "CONFLICT"  # a PUT whose trace does not extend the stored one
PRECONDITION_FAILED = "PRECONDITION_FAILED"  # If-Match names another revision
UNAUTHENTICATED = "UNAUTHENTICATED"
FORBIDDEN = "FORBIDDEN"
NOT_FOUND = "NOT_FOUND"
PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
RATE_LIMITED = "RATE_LIMITED"
METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
INTERNAL_ERROR = "INTERNAL_ERROR"
# An appended event reuses the id of an event already in the run (or earlier in the batch).
DUPLICATE_EVENT_ID = "DUPLICATE_EVENT_ID"

_STATUS_BY_CODE: dict[str, int] = {
    ErrorCode.UNKNOWN_RUN: 404,
    ErrorCode.INVALID_STATE_TRANSITION: 409,
    ErrorCode.IDEMPOTENCY_CONFLICT: 409,
    ErrorCode.RUN_ID_COLLISION: 409,
    DUPLICATE_EVENT_ID: 409,
    ErrorCode.PATCH_FAILED: 409,
    ErrorCode.STORAGE_UNAVAILABLE: 503,
    "SEQ_OUT_OF_RANGE": 422,  # a fork's fromSeq names no event of the source
    "REPLAY_DATA_EXPIRED": 410,  # data a deterministic replay needs was deleted or expired
    "NOT_A_REPLAY": 409,
    "WEBHOOK_NOT_FOUND": 404,  # another workspace's webhook answers exactly the same
    "UNKNOWN_QUEUE": 404,  # annotation queues (review.api): another workspace's is as missing
    "UNKNOWN_ITEM": 404,
    "NOT_CLAIMED": 409,
    "RESERVATION_EXPIRED": 409,
    "DELIVERY_NOT_FOUND": 404,
    "WEBHOOK_DISABLED": 409,
    "READ_ONLY": 409,  # the public demo's runs (runs.actions.workspaces.READ_ONLY)
    CONFLICT: 409,
    # Prompts (runs.actions.prompts)
    "PROMOTION_PENDING": 409,
    "ALREADY_DECIDED": 409,
    "NO_CHANGE": 409,
    "PROMPT_TYPE_MISMATCH": 409,
    "SELF_APPROVAL": 403,
    "SEPARATION_OF_DUTIES": 403,  # gate policies (runs.actions.gatepolicy)
    "ALREADY_VOTED": 409,
    "VOTES_REQUIRED": 409,  # a host's appended decision on a gate that counts votes
    PRECONDITION_FAILED: 412,
    UNAUTHENTICATED: 401,
    FORBIDDEN: 403,
    NOT_FOUND: 404,
    PAYLOAD_TOO_LARGE: 413,
    RATE_LIMITED: 429,
    "BUDGET_EXCEEDED": 402,  # past the workspace's monthly cap (runs.actions.budgets)
    # approving a run's budget gate without raising its budget (runs.actions.budgets)
    "BUDGET_LIMIT_REQUIRED": 409,
    INTERNAL_ERROR: 500,
}


def status_for(code: str) -> int:
    """HTTP status of an error code; any other protocol code is a bad request (400)."""
    return _STATUS_BY_CODE.get(code, 400)


class ApiError(Exception):
    def __init__(self, code: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status or status_for(code)
