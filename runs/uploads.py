"""One body limit for every way in, and uploads that expire.

`WORKBENCH_MAX_BODY_BYTES` (settings.DATA_UPLOAD_MAX_MEMORY_SIZE) bounds the API's bodies already;
:class:`BodyLimitUploadHandler` (first in FILE_UPLOAD_HANDLERS) applies the same limit to
multipart uploads (the /import/ page, any form with a file): file data stops being read at the
limit (the form fields before it, the CSRF token among them, are still parsed, so the page can
answer clearly). The request is
marked (`request.body_too_large`) so the view answers 413 with a clear message.

Bundles uploaded on the import page wait in `var/imports/` for their confirmation; those older
than `WORKBENCH_IMPORT_UPLOAD_TTL_SECONDS` (default 1 h) are deleted by :func:`purge_stale_uploads`,
which runs on every upload and confirmation.
"""

from __future__ import annotations

import time
from pathlib import Path

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, StopUpload


def body_limit() -> int:
    return int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)


class BodyLimitUploadHandler(FileUploadHandler):
    def __init__(self, request=None) -> None:
        super().__init__(request)
        self.received = 0

    def _refuse(self) -> None:
        if self.request is not None:
            self.request.body_too_large = True
        raise StopUpload(connection_reset=True)

    def receive_data_chunk(self, raw_data, start):
        self.received += len(raw_data)
        if self.received > body_limit():
            self._refuse()
        return raw_data

    def file_complete(self, file_size):
        return None


def upload_ttl() -> float:
    return float(getattr(settings, "WORKBENCH_IMPORT_UPLOAD_TTL_SECONDS", 3600))


def purge_stale_uploads(directory: Path, *, now: float | None = None) -> int:
    """Delete waiting uploads older than the TTL; returns how many went."""
    cutoff = (time.time() if now is None else now) - upload_ttl()
    removed = 0
    for path in directory.glob("*.json"):
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed
