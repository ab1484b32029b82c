"""Bundle imports over the 25 MiB body limit (issue 29): ``POST /api/bundles`` has its own limit,
``WORKBENCH_MAX_BUNDLE_BYTES``, and copies the body to var/imports in chunks (runs/web/spool.py)
instead of reading it into memory; every other route keeps ``WORKBENCH_MAX_BODY_BYTES``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from django.http import HttpRequest

from runs.actions.importjobs import import_dir, run_import_job
from runs.models import Event, ImportJob, Run
from runs.web.uploads import BodyLimitASGI, FileBodyQueue
from tests.bigbundle import generate_bundle

pytestmark = pytest.mark.django_db

MIB = 1024 * 1024
BIG_EVENTS = 50_000  # ~43 MB pretty-printed (bench/gen_bundle.py): over the 25 MiB body limit


@pytest.fixture(scope="module")
def big_bundle(tmp_path_factory) -> Path:
    """A valid bundle of 50,000 events written to a file by bench/gen_bundle.py (in a child)."""
    path = tmp_path_factory.mktemp("big") / "big.json"
    generate_bundle(path, BIG_EVENTS)
    assert path.stat().st_size > 40 * MIB
    return path


@pytest.fixture
def no_whole_body(monkeypatch):
    """Reading ``request.body`` (the whole body in memory) fails the test."""

    def whole(self):
        raise AssertionError(f"{self.method} {self.path}: request.body read the whole body into memory")

    monkeypatch.setattr(HttpRequest, "body", property(whole))


@pytest.fixture(autouse=True)
def own_var_dir(settings, tmp_path):
    """An import folder of this test's own: the workers of a parallel run share ``var/imports``,
    and another test's upload in flight would show here as a leftover (or vanish from ``before``)."""
    settings.VAR_DIR = tmp_path / "var"


def _leftovers() -> set[str]:
    return {p.name for p in import_dir().glob("*.part")}


def test_a_bundle_over_the_body_limit_is_copied_to_disk_and_imported_by_a_job(
    api, big_bundle, no_whole_body, django_capture_on_commit_callbacks
):
    before = _leftovers()
    data = big_bundle.read_bytes()  # the test client's payload; the server side never reads it whole
    with django_capture_on_commit_callbacks(execute=False):
        response = api.send("POST", "/api/bundles", raw=data, headers={"Idempotency-Key": "big-import-1"})
    assert response.status_code == 202, response.content[:300]
    body = response.json()
    assert body["size"] == len(data) and body["status"] == "queued"
    job = ImportJob.objects.get(job_id=body["job"])
    kept = import_dir() / job.file
    assert kept.stat().st_size == len(data) and kept.read_bytes()[:64] == data[:64]
    del data
    assert _leftovers() == before  # the copy became the job's file; nothing half-written is left
    assert run_import_job(job.pk).status == "succeeded"
    polled = api.get(body["url"]).json()
    assert polled["status"] == "succeeded" and polled["events"] == BIG_EVENTS
    run = Run.unscoped.get(run_id=polled["runId"])
    assert run.last_seq == BIG_EVENTS and Event.objects.filter(run=run).count() == BIG_EVENTS
    assert not kept.exists()


def test_the_same_idempotency_key_and_body_replays_the_first_answer(api, no_whole_body, conformance_dir):
    data = (conformance_dir / "valid").glob("*.json")
    bundle = max(data, key=lambda p: p.stat().st_size).read_bytes()
    key = {"Idempotency-Key": "bundle-replay-1"}
    first = api.send("POST", "/api/bundles?background=true", raw=bundle, headers=key)
    again = api.send("POST", "/api/bundles?background=true", raw=bundle, headers=key)
    assert first.status_code == again.status_code == 202
    assert again.json()["job"] == first.json()["job"] and ImportJob.objects.count() == 1
    other = api.send("POST", "/api/bundles?background=true", raw=bundle + b" ", headers=key)
    assert other.status_code in (409, 422) and other.json()["code"]  # another body under the same key
    assert ImportJob.objects.count() == 1


def test_an_empty_body_is_refused_and_leaves_nothing(api):
    before = _leftovers()
    response = api.send("POST", "/api/bundles", raw=b"")
    assert response.status_code == 400 and response.json()["code"] == "INVALID_JSON"
    assert _leftovers() == before and ImportJob.objects.count() == 0


def test_a_forbidden_import_leaves_no_copy(reader, conformance_dir):
    before = _leftovers()
    bundle = next((conformance_dir / "valid").glob("*.json")).read_bytes()
    response = reader.send("POST", "/api/bundles", raw=bundle, headers={"Idempotency-Key": "reader-1"})
    assert response.status_code == 403
    assert _leftovers() == before and ImportJob.objects.count() == 0


def test_the_bundle_limit_refuses_with_413_and_changes_nothing(api, settings, conformance_dir):
    settings.WORKBENCH_MAX_BUNDLE_BYTES = 2048
    bundle = max((conformance_dir / "valid").glob("*.json"), key=lambda p: p.stat().st_size).read_bytes()
    assert len(bundle) > 2048
    before = (_leftovers(), Run.unscoped.count())
    response = api.send("POST", "/api/bundles?background=true", raw=bundle)
    assert response.status_code == 413 and response.json()["code"] == "PAYLOAD_TOO_LARGE"
    assert "WORKBENCH_MAX_BUNDLE_BYTES" in response.json()["error"]
    assert (_leftovers(), Run.unscoped.count()) == before and ImportJob.objects.count() == 0


def test_26_mib_on_another_route_is_still_refused_and_changes_nothing(api, started_run, no_whole_body):
    body = b'{"events": [' + b" " * (26 * MIB) + b"]}"
    before = (Event.objects.count(), Run.unscoped.count(), _leftovers())
    for method, path in [
        ("POST", f"/api/runs/{started_run}/events"),
        ("POST", "/api/bundles/verify"),
        ("PUT", f"/api/runs/{started_run}"),
    ]:
        response = api.send(method, path, raw=body)
        assert response.status_code == 413, (path, response.content[:200])
        assert response.json()["code"] == "PAYLOAD_TOO_LARGE"
    assert (Event.objects.count(), Run.unscoped.count(), _leftovers()) == before
    assert ImportJob.objects.count() == 0


# -- at the ASGI door, with the default limits -------------------------------------------------


def _scope(method: str, path: str, length: int, *credential: tuple[bytes, bytes]) -> dict:
    return {
        "type": "http",
        "method": method,
        "path": path,
        "headers": [(b"content-length", str(length).encode()), *credential],
    }


BEARER = (b"authorization", b"Bearer wbt_anything")
SESSION = (b"cookie", b"theme=dark; sessionid=abc")


@pytest.mark.parametrize(
    ("method", "path", "passes"),
    [
        ("POST", "/api/bundles", True),
        ("POST", "/import/", True),
        ("POST", "/api/bundles/verify", False),
        ("POST", "/api/runs", False),
        ("PUT", "/api/bundles", False),  # the bundle limit is the import's alone
        ("POST", "/v1/traces", False),
    ],
)
@pytest.mark.parametrize(
    ("credential", "counts"),
    [((BEARER,), True), ((SESSION,), True), ((), False), (((b"authorization", b"Basic eDp5"),), False)],
    ids=["bearer", "session", "none", "basic"],
)
def test_the_door_lets_only_bundle_imports_past_25_mib(method, path, passes, credential, counts):
    """Only a bundle import that presents a credential (checked for presence at the door; the
    view authenticates it) gets the bundle limit: a stranger's body stops at 25 MiB."""
    passes = passes and counts
    reached = []
    sent: list[dict] = []

    async def app(scope, receive, send):
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(BodyLimitASGI(app)(_scope(method, path, 26 * MIB, *credential), receive, send))
    status = sent[0]["status"]
    assert (status, bool(reached)) == ((202, True) if passes else (413, False))


# -- daphne: a body kept in a file reaches the application a chunk at a time ------------------


def test_a_file_kept_body_is_handed_over_a_chunk_at_a_time_then_the_disconnect(tmp_path):
    async def scenario():
        content = (tmp_path / "body").open("w+b")
        content.write(b"a" * 2500)
        queue = FileBodyQueue(content, chunk=1000)
        queue.put_nowait({"type": "http.request", "body": b"", "more_body": False})  # daphne's: dropped
        got = [await queue.get() for _ in range(3)]
        assert [(len(m["body"]), m["more_body"]) for m in got] == [(1000, True), (1000, True), (500, False)]
        assert content.closed  # read to the end: let go
        queue.put_nowait({"type": "http.disconnect"})
        assert await queue.get() == {"type": "http.disconnect"}

    asyncio.run(scenario())


def test_a_file_kept_body_of_whole_chunks_ends_on_its_last_chunk(tmp_path):
    async def scenario():
        content = (tmp_path / "body").open("w+b")
        content.write(b"a" * 2000)
        queue = FileBodyQueue(content, chunk=1000)
        got = [await queue.get() for _ in range(2)]
        assert [(len(m["body"]), m["more_body"]) for m in got] == [(1000, True), (1000, False)]

    asyncio.run(scenario())
