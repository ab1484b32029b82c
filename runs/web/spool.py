"""A bundle import's request body, copied to a file in chunks: never held in memory.

``POST /api/bundles`` accepts bodies up to `WORKBENCH_MAX_BUNDLE_BYTES` (8 GiB by default, see
runs/web/uploads.py). :func:`spool_body` copies the request stream :data:`CHUNK` bytes at a time
to ``var/imports/<id>.part`` (where import jobs keep their bundles), hashing it on the way, so the
import view can hand the file to a background job (:func:`runs.actions.importjobs.
do_create_import_job` moves it) or read a small one. The copy is made once per request (an
Idempotency-Key's fingerprint and the view share it). A copy that ends short of the declared
``Content-Length`` (the client went away) is refused; one that passes the limit (a body without a
declared length) raises ``RequestDataTooBig`` (413). The caller removes the file when it is done
with it (:meth:`SpooledBody.discard`); a request killed mid-copy leaves a ``.part`` that
:func:`runs.web.uploads.purge_stale_uploads` removes once it is older than the upload TTL.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest

from runs.actions.importjobs import import_dir, open_private
from runs.protocol.values import new_id
from runs.web.uploads import declared_length, request_limit

CHUNK = 1 << 20
_ATTR = "_workbench_spooled_body"


class BodyIncomplete(Exception):
    """The body ended before its declared length (the client went away)."""

    def __init__(self, received: int, declared: int) -> None:
        super().__init__(f"the request body ended after {received} of its declared {declared} bytes")
        self.received, self.declared = received, declared


@dataclass(frozen=True)
class SpooledBody:
    path: Path
    size: int
    sha256: str

    def discard(self) -> None:
        self.path.unlink(missing_ok=True)


def spool_body(request: HttpRequest) -> SpooledBody:
    """The request's body copied to a file under ``var/imports`` (once per request)."""
    spooled = getattr(request, _ATTR, None)
    if spooled is not None:
        return spooled
    limit = request_limit(request)
    declared = declared_length(request.META.get("CONTENT_LENGTH"))
    path = import_dir() / f"{new_id('upl')}.part"
    digest = hashlib.sha256()
    size = 0
    try:
        with open_private(path) as out:
            while chunk := request.read(CHUNK):
                size += len(chunk)
                if size > limit:
                    raise RequestDataTooBig(f"the request body exceeds {limit} bytes")
                digest.update(chunk)
                out.write(chunk)
        if declared is not None and size < declared:
            raise BodyIncomplete(size, declared)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    spooled = SpooledBody(path=path, size=size, sha256=digest.hexdigest())
    setattr(request, _ATTR, spooled)
    return spooled


def spooled_if_any(request: HttpRequest) -> SpooledBody | None:
    """The copy :func:`spool_body` made for this request, if it made one."""
    return getattr(request, _ATTR, None)
