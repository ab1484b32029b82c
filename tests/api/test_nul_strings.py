"""NUL (U+0000) in protocol strings over REST, on SQLite and PostgreSQL (see
tests/storage/test_nul_strings.py): a RunStoreState PUT then GET is byte-equal, and a NUL in a
run id is refused or not found, never a server error."""

from __future__ import annotations

import json

import pytest

from runs.models import Run
from runs.protocol.canonical import wire_bytes
from tests.storage.test_nul_strings import _with_nul


@pytest.mark.django_db
@pytest.mark.parametrize("tail", ["\u0000", "\u0000\uffff1" + "y" * 400], ids=["nul", "nul-escape-long"])
def test_runstore_put_then_get_with_nul_strings(api, conformance_dir, tail):
    from tests.jstext import member_text

    paths = sorted((conformance_dir / "expected").glob("*.runstore.json"))
    assert paths
    for path in paths:
        body = json.loads(member_text(path.read_text(encoding="utf-8"), "body"))
        run_id = body["run"]["id"]
        changed = _with_nul(body, tail=tail)
        changed["run"]["id"] = run_id
        text = json.dumps(changed, ensure_ascii=False, separators=(",", ":"))
        put = api.put(f"/api/runs/{run_id}", raw=text.encode())
        assert put.status_code == 201, (path.name, put.content)
        got = api.get(f"/api/runs/{run_id}")
        assert got.status_code == 200
        assert got.content == wire_bytes(json.loads(text)), path.name


@pytest.mark.django_db
def test_a_nul_in_a_run_id_is_not_found_or_refused_never_a_server_error(api, workflow, client, alice):
    from tests.pages.conftest import login

    started = api.post("/api/runs", {"workflow": workflow, "runId": "nul\u0000id"})
    assert started.status_code == 400 and started.json()["code"] == "INVALID_RUN_ID"
    assert api.get("/api/runs/nul%00id").status_code == 404
    assert api.get("/api/runs/nul%00id/events").status_code == 404
    assert api.get("/api/runs", q="nul\u0000").status_code in (200, 400)
    login(client, alice)
    assert client.get("/runs/nul%00id/").status_code == 404
    assert client.get("/runs/", {"q": "a\u0000b", "tag": "t\u0000"}).status_code in (200, 400)
    assert not Run.objects.filter(run_id__contains="\u0000").exists()


@pytest.mark.django_db
def test_nul_in_any_filter_or_search_parameter_is_never_a_server_error(api, workflow, client, alice):
    from tests.pages.conftest import login

    assert api.post("/api/runs", {"workflow": workflow, "runId": "plain"}).status_code == 201
    nul = "x\u0000y"
    login(client, alice)
    keys = ("q", "tag", "workflow", "status", "cursor", "type", "step", "corr", "before", "after")
    keys += ("key", "artifact", "a", "b", "from", "to", "provider", "model", "seq", "rule", "page")
    pages = ["/runs/", "/runs/inbox/", "/ledger/", "/compare/"]
    for sub in ("", "timeline/", "spans/", "graph/", "gates/", "artifacts/", "artifacts/diff/", "rules/"):
        pages += [f"/runs/plain/{sub}", f"/runs/nul%00id/{sub}"]
    pages += ["/runs/plain/ledger/", "/runs/plain/annotations/", "/runs/plain/fork/", "/runs/plain/export/"]
    for path in pages:
        for key in keys:
            response = client.get(path, {key: nul})
            assert response.status_code < 500, (path, key, response.status_code)
    for path in ("/api/runs", "/api/runs/plain/events"):
        for key in ("q", "tag", "workflow", "status", "type", "stepId", "correlationId", "cursor"):
            response = api.get(path, **{key: nul})
            assert response.status_code in (200, 400, 404), (path, key, response.status_code)
