"""REST for prompts: pipelines fetch a version by label or number; saving and moving labels go
through the one write path; a protected label answers a promotion request (202); 404 for outsiders."""

from __future__ import annotations

from tests.api.conftest import BearerClient


def _save(api, name="team/summary", body="Sum up {{text}}", **kw):
    response = api.post("/api/prompts", {"name": name, "body": body, **kw})
    assert response.status_code == 201, response.content
    return response.json()


def test_save_then_fetch_by_label_and_version(writer, read_token):
    first = _save(writer, config={"model": "claude-x", "temperature": 0})
    assert first["version"] == 1 and first["labels"] == ["latest"] and first["variables"] == ["text"]
    _save(writer, body="Summarise {{text}} in {{n}} words")
    reader = BearerClient(read_token)
    assert reader.get("/api/prompts/team/summary").status_code == 404  # no production label yet
    moved = writer.post("/api/prompt-labels", {"name": "team/summary", "label": "production", "version": 1})
    assert moved.status_code == 200 and moved.json()["moved"] is True
    got = reader.get("/api/prompts/team/summary")
    assert (
        got.status_code == 200 and got.json()["version"] == 1 and got.json()["config"]["model"] == "claude-x"
    )
    assert reader.get("/api/prompts/team%2Fsummary", label="latest").json()["version"] == 2
    assert reader.get("/api/prompts/team/summary", version="2").json()["variables"] == ["text", "n"]
    listing = reader.get("/api/prompts").json()
    assert listing == [
        {
            "name": "team/summary",
            "type": "text",
            "tags": [],
            "versions": 2,
            "labels": {"latest": 2, "production": 1},
        }
    ]
    for params in ({"version": "9"}, {"label": "nope"}):
        response = reader.get("/api/prompts/team/summary", **params)
        assert response.status_code == 404 and response.json()["code"] == "NOT_FOUND"
    bad = reader.get("/api/prompts/team/summary", label="production", version="1")
    assert bad.status_code == 400
    assert reader.get("/api/prompts/team/summary", version="x").status_code == 400


def test_readers_cannot_write_and_bad_bodies_are_refused(writer, read_token):
    reader = BearerClient(read_token)
    assert reader.post("/api/prompts", {"name": "p", "body": "x"}).status_code == 403
    _save(writer, name="p")
    refused = reader.post("/api/prompt-labels", {"name": "p", "label": "production", "version": 1})
    assert refused.status_code == 403
    for body in (
        {"name": "p"},
        {"name": "p", "body": 3},
        {"name": "", "body": "x"},
        {"name": "p", "body": "x", "extra": 1},
    ):
        response = writer.post("/api/prompts", body)
        assert response.status_code == 400, body
        assert response.json()["code"] == "INVALID_INPUT"
    assert writer.send("POST", "/api/prompts", raw=b"[1]").status_code == 400
    assert (
        writer.post("/api/prompt-labels", {"name": "p", "label": "latest", "version": 1}).status_code == 400
    )


def test_a_protected_label_answers_a_promotion_request(writer, workspace, alice):
    from runs.actions.permissions import ROLE_SCOPES
    from runs.actions.prompts import do_protect_label

    _save(writer, name="p")
    _save(writer, name="p", body="two")
    writer.post("/api/prompt-labels", {"name": "p", "label": "production", "version": 1})
    do_protect_label(workspace, label="production", protected=True, scopes=ROLE_SCOPES["owner"], user=alice)
    asked = writer.post(
        "/api/prompt-labels", {"name": "p", "label": "production", "version": 2, "note": "v2 wins"}
    )
    assert asked.status_code == 202
    assert asked.json()["moved"] is False and asked.json()["promotion_request"]
    again = writer.post("/api/prompt-labels", {"name": "p", "label": "production", "version": 2})
    assert again.status_code == 409 and again.json()["code"] == "PROMOTION_PENDING"
    assert writer.get("/api/prompts/p").json()["version"] == 1


def test_outsiders_get_404(writer, outsider_token):
    _save(writer, name="p")
    writer.post("/api/prompt-labels", {"name": "p", "label": "production", "version": 1})
    outsider = BearerClient(outsider_token)
    assert outsider.get("/api/prompts/p").status_code == 404
    assert outsider.get("/api/prompts").json() == []
    moved = outsider.post("/api/prompt-labels", {"name": "p", "label": "production", "version": 1})
    assert moved.status_code == 404


def test_the_openapi_document_lists_the_prompt_routes(client):
    paths = client.get("/api/openapi.json").json()["paths"]
    assert "/api/prompts/{prompt_name}" in paths and "/api/prompts" in paths and "/api/prompt-labels" in paths
