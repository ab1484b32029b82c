"""One body limit for every way in, refused at the door without buffering the body.

The ASGI application (what daphne and uvicorn serve) answers 413 ``PAYLOAD_TOO_LARGE`` to a
declared Content-Length over ``WORKBENCH_MAX_BODY_BYTES`` without reading a byte of the body, and
cuts a chunked body off as soon as it passes the limit. Inside Django (WSGI, the test client) the
same answer comes from a middleware, before CSRF or any view reads the body.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from runs.web.uploads import BodyLimitASGI
from tests.pages.conftest import login

LIMIT = 64 * 1024
INGRESS = ["/import/", "/api/bundles", "/api/runs", "/v1/traces", "/api/mcp", "/playground/send/"]


class Body:
    """An ASGI receive() over ``chunks`` chunks of ``size`` bytes that counts what was read."""

    def __init__(self, chunks: int, size: int) -> None:
        self.chunks, self.size, self.read = chunks, size, 0

    async def __call__(self) -> dict:
        if self.read >= self.chunks:
            await asyncio.sleep(3600)  # the client waits for the answer
        self.read += 1
        return {"type": "http.request", "body": b"x" * self.size, "more_body": self.read < self.chunks}


def _scope(path: str, headers: list[tuple[bytes, bytes]]) -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }


async def _call(app, scope, receive) -> tuple[int, dict, bytes]:
    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    await asyncio.wait_for(app(scope, receive, send), timeout=60)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start["headers"]), body


@pytest.fixture
def small_limit(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = LIMIT
    settings.WORKBENCH_MAX_BUNDLE_BYTES = LIMIT  # the bundle imports' own limit, as small here
    return LIMIT


@pytest.mark.asyncio
@pytest.mark.parametrize("path", INGRESS)
async def test_a_declared_length_over_the_limit_is_refused_before_the_body_is_read(small_limit, path):
    from workbench.asgi import application

    body = Body(chunks=2000, size=64 * 1024)  # 125 MB, were it read
    scope = _scope(path, [(b"content-length", str(2000 * 64 * 1024).encode())])
    status, headers, content = await _call(application, scope, body)
    assert status == 413
    assert body.read == 0  # not one chunk of the body was read
    assert b"PAYLOAD_TOO_LARGE" in content
    if path.startswith(("/api/", "/v1/")):
        assert headers[b"content-type"] == b"application/json"
        assert json.loads(content)["code"] == "PAYLOAD_TOO_LARGE"


@pytest.mark.asyncio
@pytest.mark.parametrize("path", ["/import/", "/api/bundles", "/api/mcp"])
async def test_a_chunked_body_is_cut_off_at_the_limit(small_limit, path):
    from workbench.asgi import application

    body = Body(chunks=2000, size=16 * 1024)  # no Content-Length: 31 MB if read to the end
    status, _, content = await _call(application, _scope(path, []), body)
    assert status == 413
    assert b"PAYLOAD_TOO_LARGE" in content
    assert body.read <= LIMIT // (16 * 1024) + 1  # read up to the limit, not further


@pytest.mark.asyncio
async def test_a_body_longer_than_declared_is_cut_off_too(small_limit):
    body = Body(chunks=200, size=16 * 1024)
    seen = {}

    async def app(scope, receive, send):
        while (message := await receive())["type"] == "http.request" and message.get("more_body"):
            pass
        seen["last"] = message["type"]
        await send({"type": "http.response.start", "status": 400, "headers": []})
        await send({"type": "http.response.body", "body": b"the app's answer"})

    status, _, content = await _call(
        BodyLimitASGI(app), _scope("/api/runs", [(b"content-length", b"100")]), body
    )
    assert status == 413 and b"PAYLOAD_TOO_LARGE" in content
    assert seen["last"] == "http.disconnect"  # the application saw the client go, not the rest
    assert body.read <= LIMIT // (16 * 1024) + 1


@pytest.mark.asyncio
async def test_a_body_within_the_limit_reaches_the_application_whole(small_limit):
    body = Body(chunks=3, size=1024)
    got = bytearray()

    async def app(scope, receive, send):
        while True:
            message = await receive()
            got.extend(message.get("body", b""))
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    status, _, content = await _call(BodyLimitASGI(app), _scope("/api/runs", []), body)
    assert (status, content, len(got)) == (200, b"ok", 3072)


# -- inside Django: the same status and code on every way in -----------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/playground/send/", "/playground/preview/", "/v1/traces", "/api/bundles"])
def test_every_json_ingress_answers_413_with_the_code(client, alice, small_limit, path):
    login(client, alice)
    response = client.post(path, b"{" + b" " * (LIMIT + 10) + b"}", content_type="application/json")
    assert response.status_code == 413, response.content[:200]
    assert b"PAYLOAD_TOO_LARGE" in response.content


@pytest.mark.django_db
def test_the_import_page_refuses_at_the_api_limit_before_csrf_reads_the_form(alice, small_limit):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    login(client, alice)
    big = SimpleUploadedFile("big.json", b"[" + b"1," * LIMIT + b"1]", content_type="application/json")
    response = client.post("/import/", {"bundle": big})
    assert response.status_code == 413  # not 403: the body was never parsed for its CSRF token
    assert b"PAYLOAD_TOO_LARGE" in response.content


@pytest.mark.django_db
def test_the_import_page_streams_an_upload_to_disk(client, alice, settings, monkeypatch, conformance_dir):
    """An upload beyond FILE_UPLOAD_MAX_MEMORY_SIZE is a temporary file and is copied in chunks:
    nothing reads it whole into memory on the way to var/imports/."""
    from django.core.files.uploadedfile import TemporaryUploadedFile

    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 1024
    data = max((conformance_dir / "valid").glob("*.json"), key=lambda p: p.stat().st_size).read_bytes()
    assert len(data) > 1024
    whole_reads = []

    def read(self, size=-1):
        if size is None or size < 0:
            whole_reads.append(self.name)
        return self.file.read(size)

    monkeypatch.setattr(TemporaryUploadedFile, "read", read, raising=False)
    login(client, alice)
    response = client.post("/import/", {"bundle": SimpleUploadedFile("b.json", data)})
    assert response.status_code == 200, response.content[:300]
    assert "token" in response.context
    assert whole_reads == []
