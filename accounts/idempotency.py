"""``Idempotency-Key``: a retried write returns the first response instead of running again.

Records are keyed by workspace and key. The first request reserves the key (a row without a
status) before it runs; a retry that arrives while the first one is still running is told so
(409, retry later); a retry after it finished gets the stored response byte for byte; a key
reused for a different request (method, path or body differ) is refused. Responses with a
5xx status are not kept, so a retry after a server failure runs again. Records older than
``WORKBENCH_IDEMPOTENCY_TTL_SECONDS`` (default 24 h) are forgotten.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.http import HttpResponse
from django.utils import timezone

from accounts.models import IdempotencyRecord
from runs.models import Workspace

MAX_KEY_LENGTH = 255
# A reservation older than this is considered abandoned (its request died) and may be taken over.
STALE_RESERVATION = timedelta(minutes=5)
REPLAYED_HEADERS = ("ETag", "Location", "Content-Type")


class IdempotencyError(Exception):
    code = "IDEMPOTENCY_CONFLICT"
    status = 409


class KeyInUse(IdempotencyError):
    """The first request with this key has not finished yet."""


class KeyReused(IdempotencyError):
    """The key was already used for a different request."""


class InvalidKey(IdempotencyError):
    code = "INVALID_INPUT"
    status = 400


@dataclass
class Replay:
    record: IdempotencyRecord

    def response(self) -> HttpResponse:
        record = self.record
        response = HttpResponse(
            bytes(record.body), status=record.status_code, content_type=record.content_type or None
        )
        for name, value in (record.headers or {}).items():
            response[name] = value
        response["Idempotent-Replayed"] = "true"
        return response


def ttl() -> timedelta:
    return timedelta(seconds=int(getattr(settings, "WORKBENCH_IDEMPOTENCY_TTL_SECONDS", 24 * 3600)))


def fingerprint(method: str, path: str, body: bytes) -> str:
    digest = hashlib.sha256()
    digest.update(method.upper().encode())
    digest.update(b"\n")
    digest.update(path.encode())
    digest.update(b"\n")
    digest.update(body)
    return digest.hexdigest()


def begin(*, workspace: Workspace, key: str, fingerprint: str, actor: str = "") -> IdempotencyRecord | Replay:
    """Reserve ``key`` for this request, or return the stored first response to replay.

    Raises KeyInUse, KeyReused or InvalidKey.
    """
    key = key.strip()
    if not key or len(key) > MAX_KEY_LENGTH or not key.isprintable():
        raise InvalidKey(f"Idempotency-Key must be 1..{MAX_KEY_LENGTH} printable characters")
    now = timezone.now()
    IdempotencyRecord.objects.filter(workspace=workspace, key=key, created_at__lt=now - ttl()).delete()
    try:
        with transaction.atomic():
            return IdempotencyRecord.objects.create(
                workspace=workspace, key=key, fingerprint=fingerprint, actor=actor, created_at=now
            )
    except IntegrityError:
        pass
    existing = IdempotencyRecord.objects.get(workspace=workspace, key=key)
    if existing.fingerprint != fingerprint:
        raise KeyReused("this Idempotency-Key was already used for a different request")
    if existing.status_code is None:
        if existing.created_at >= now - STALE_RESERVATION:
            raise KeyInUse("a request with this Idempotency-Key is still being processed; retry later")
        taken = IdempotencyRecord.objects.filter(
            pk=existing.pk, status_code__isnull=True, created_at=existing.created_at
        ).update(created_at=now, actor=actor)
        if not taken:
            raise KeyInUse("a request with this Idempotency-Key is still being processed; retry later")
        existing.created_at = now
        return existing
    return Replay(existing)


def finish(record: IdempotencyRecord, response: HttpResponse) -> None:
    """Keep the response for replays (or release the key when the server failed)."""
    if response.status_code >= 500 or getattr(response, "streaming", False):
        release(record)
        return
    headers = {name: response[name] for name in REPLAYED_HEADERS if response.has_header(name)}
    content_type = headers.pop("Content-Type", "")
    IdempotencyRecord.objects.filter(pk=record.pk).update(
        status_code=response.status_code,
        body=bytes(response.content),
        content_type=content_type,
        headers=headers,
    )


def release(record: IdempotencyRecord) -> None:
    IdempotencyRecord.objects.filter(pk=record.pk, status_code__isnull=True).delete()
