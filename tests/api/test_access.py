"""Who may call what: 401 JSON, scopes (403), the outsider (404 everywhere), sessions and CSRF,
body limit (413), rate limits (429), the Link header on every response."""

from __future__ import annotations

import json

import pytest
from django.test import Client, override_settings
from workbench_sdk.client import make_event

from runs.models import Run

DESCRIBED_BY = '</api/openapi.json>; rel="describedby"'


def _run_urls(run_id: str, workflow: dict) -> list[tuple[str, str, object]]:
    """Every endpoint that names a run: (method, path, body)."""
    event = make_event(run_id, "annotation", text="x")
    return [
        ("GET", f"/api/runs/{run_id}", None),
        ("PUT", f"/api/runs/{run_id}", {"revision": 0, "run": {"id": run_id}, "trace": []}),
        ("DELETE", f"/api/runs/{run_id}", None),
        ("GET", f"/api/runs/{run_id}/events", None),
        ("POST", f"/api/runs/{run_id}/events", {"events": [event]}),
        (
            "POST",
            f"/api/runs/{run_id}/gates/resolve",
            {"stepId": "review", "gate": "PAUSE_BEFORE", "decision": "approved"},
        ),
        ("POST", f"/api/runs/{run_id}/artifacts", {"artifactKey": "a", "typeId": "json", "data": {}}),
        ("POST", f"/api/runs/{run_id}/artifacts/a/patch", {"fromVersion": 1, "patch": []}),
        ("POST", f"/api/runs/{run_id}/annotations", {"text": "x"}),
        ("POST", f"/api/runs/{run_id}/cancel", {}),
        ("GET", f"/api/runs/{run_id}/bundle", None),
        ("GET", f"/api/runs/{run_id}/transcript.jsonl", None),
    ]


def _call(client, method, path, body):
    if method == "GET":
        return client.get(path)
    return client.send(method, path, body)


def test_outsider_gets_404_on_every_run_url_like_a_missing_run(api, outsider, started_run, workflow):
    api.post(f"/api/runs/{started_run}/annotations", {"text": "secret"})
    for method, path, body in _run_urls(started_run, workflow):
        if method == "PUT":
            continue  # a PUT of a foreign id cannot create a run there (checked below)
        foreign = _call(outsider, method, path, body)
        missing = _call(outsider, method, path.replace(started_run, "run_does_not_exist"), body)
        assert foreign.status_code == 404, (method, path, foreign.content)
        assert foreign.json()["code"] == missing.json()["code"] == "UNKNOWN_RUN", (method, path)
        assert foreign.json()["error"].replace(started_run, "?") == missing.json()["error"].replace(
            "run_does_not_exist", "?"
        )
    assert Run.objects.get(run_id=started_run).last_seq == 1  # untouched
    assert outsider.get("/api/runs").json() == []


def test_outsider_put_cannot_touch_another_workspaces_run(api, outsider, started_run):
    """The same id PUT by another workspace is that workspace's own run: acme's is untouched."""
    state = api.get(f"/api/runs/{started_run}").json()
    state["trace"].append(make_event(started_run, "annotation", text="intruder"))
    response = outsider.put(f"/api/runs/{started_run}", state)
    assert response.status_code == 201, response.content
    mine = Run.objects.get(run_id=started_run, workspace__slug="acme")
    assert mine.last_seq == 0
    theirs = Run.objects.get(run_id=started_run, workspace__slug="globex")
    assert theirs.pk != mine.pk and theirs.last_seq == 1


def test_unauthenticated_is_401_json_never_a_redirect(anonymous, started_run, workflow):
    calls = [
        *_run_urls(started_run, workflow),
        ("GET", "/api/runs", None),
        ("POST", "/api/runs", {"workflow": workflow}),
    ]
    calls += [("POST", "/api/bundles", {}), ("POST", "/api/bundles/verify", {})]
    for method, path, body in calls:
        response = _call(anonymous, method, path, body)
        assert response.status_code == 401, (method, path)
        assert response["Content-Type"].startswith("application/json")
        assert response.json()["code"] == "UNAUTHENTICATED"
        assert response["Link"] == DESCRIBED_BY


def test_bad_tokens_are_401(started_run):
    from tests.api.conftest import BearerClient

    for token in ("wbt_deadbeef0000_" + "x" * 43, "garbage", ""):
        assert BearerClient(token).get("/api/runs").status_code == 401


def test_revoked_token_is_401(api, workspace, full_token):
    from accounts.tokens import revoke_token

    assert api.get("/api/runs").status_code == 200
    revoke_token(workspace=workspace, key_id=full_token.split("_")[1])
    assert api.get("/api/runs").status_code == 401


def test_public_endpoints(anonymous):
    health = anonymous.get("/api/health")
    assert health.status_code == 200 and health.json() == {"status": "ok", "protocolVersion": "1.0.0"}
    assert health["Link"] == DESCRIBED_BY
    spec = anonymous.get("/api/openapi.json")
    assert spec.status_code == 200 and spec.json()["openapi"].startswith("3.1")
    unknown = anonymous.get("/api/no/such/thing")
    assert (
        unknown.status_code == 404
        and unknown.json()["code"] == "NOT_FOUND"
        and unknown["Link"] == DESCRIBED_BY
    )


def test_wrong_scopes_are_403(reader, writer, reviewer, started_run, workflow):
    def code(client, method, path, body):
        response = _call(client, method, path, body)
        return response.status_code, response.json().get("code") if response.content else None

    urls = {(m, p): b for m, p, b in _run_urls(started_run, workflow)}
    write_only = [
        ("POST", "/api/runs", {"workflow": workflow}),
        ("POST", f"/api/runs/{started_run}/events", urls[("POST", f"/api/runs/{started_run}/events")]),
        ("POST", f"/api/runs/{started_run}/cancel", {}),
        ("DELETE", f"/api/runs/{started_run}", None),
        ("PUT", f"/api/runs/{started_run}", urls[("PUT", f"/api/runs/{started_run}")]),
        ("POST", "/api/bundles", {}),
    ]
    review_ok = [
        (
            "POST",
            f"/api/runs/{started_run}/gates/resolve",
            urls[("POST", f"/api/runs/{started_run}/gates/resolve")],
        ),
        ("POST", f"/api/runs/{started_run}/annotations", {"text": "x"}),
        ("POST", f"/api/runs/{started_run}/artifacts", {"artifactKey": "a", "typeId": "json", "data": {}}),
    ]
    for method, path, body in write_only + review_ok:
        assert code(reader, method, path, body) == (403, "FORBIDDEN"), (method, path)
    for method, path, body in write_only:
        assert code(reviewer, method, path, body) == (403, "FORBIDDEN"), (method, path)
    assert code(writer, "POST", f"/api/runs/{started_run}/gates/resolve", review_ok[0][2])[0] == 403
    assert code(reviewer, "POST", f"/api/runs/{started_run}/annotations", {"text": "x"})[0] == 200
    assert code(writer, "POST", f"/api/runs/{started_run}/annotations", {"text": "y"})[0] == 200
    assert reader.get(f"/api/runs/{started_run}").status_code == 200
    assert reader.get(f"/api/runs/{started_run}/bundle").status_code == 200


def _session_client(user) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def test_session_users_act_in_their_workspace_with_role_scopes(alice, vera, charlie, workflow):
    owner = _session_client(alice)
    # Unsafe methods with a session need the CSRF token.
    refused = owner.post("/api/runs", json.dumps({"workflow": workflow}), content_type="application/json")
    assert refused.status_code == 403 and refused.json()["code"] == "FORBIDDEN"
    owner.get("/api/health")
    from django.middleware.csrf import _get_new_csrf_string

    secret = _get_new_csrf_string()
    owner.cookies["csrftoken"] = secret
    started = owner.post(
        "/api/runs",
        json.dumps({"workflow": workflow}),
        content_type="application/json",
        headers={"X-CSRFToken": secret},
    )
    assert started.status_code == 201, started.content
    run_id = started.json()["runId"]
    assert Run.objects.get(run_id=run_id).workspace.slug == "acme"
    assert Run.objects.get(run_id=run_id).created_by == "user:alice"
    viewer = _session_client(vera)
    assert viewer.get(f"/api/runs/{run_id}").status_code == 200
    viewer.cookies["csrftoken"] = secret
    forbidden = viewer.post(
        f"/api/runs/{run_id}/annotations",
        json.dumps({"text": "x"}),
        content_type="application/json",
        headers={"X-CSRFToken": secret},
    )
    assert forbidden.status_code == 403
    assert _session_client(charlie).get(f"/api/runs/{run_id}").status_code == 404
    # X-Workspace picks one of the user's workspaces; a foreign one is not theirs.
    assert owner.get("/api/runs", headers={"X-Workspace": "globex"}).status_code == 401


def test_user_without_workspace_gets_a_personal_one(django_user_model, workflow, db):
    loner = django_user_model.objects.create_user(username="loner", password="loner-password-123")
    client = Client()
    client.force_login(loner)
    assert client.get("/api/runs").json() == []
    from runs.models import Membership

    membership = Membership.objects.get(user=loner)
    assert membership.workspace.is_personal and membership.role == "owner"


def test_bearer_post_needs_no_csrf_even_with_a_session_cookie(alice, full_token, workflow):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post(
        "/api/runs",
        json.dumps({"workflow": workflow}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {full_token}"},
    )
    assert response.status_code == 201


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=2048, WORKBENCH_MAX_BUNDLE_BYTES=2048)
def test_oversized_bodies_are_413_json(api, started_run, anonymous):
    big = {"events": [make_event(started_run, "annotation", text="x" * 4096)]}
    for method, path in [
        ("POST", f"/api/runs/{started_run}/events"),
        ("PUT", f"/api/runs/{started_run}"),
        ("POST", "/api/bundles"),
        ("POST", "/api/bundles/verify"),
    ]:
        response = api.send(method, path, big)
        assert response.status_code == 413, (path, response.content)
        assert response.json()["code"] == "PAYLOAD_TOO_LARGE" and response["Link"] == DESCRIBED_BY
    assert anonymous.post("/api/bundles", big).status_code == 413


def test_default_body_limit_is_25_mb(settings):
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE == 25 * 1024 * 1024
    assert settings.WORKBENCH_MAX_BUNDLE_BYTES == 8 * 1024**3  # bundle imports alone


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1024)
def test_only_the_bundle_import_has_the_larger_limit(api, started_run):
    bundle = api.get(f"/api/runs/{started_run}/bundle").content
    assert len(bundle) > 1024
    imported = api.send("POST", "/api/bundles?as_new_id=true", raw=bundle)
    assert imported.status_code == 201, imported.content  # over the body limit, under the bundle one
    for method, path in [("POST", "/api/bundles/verify"), ("POST", f"/api/runs/{started_run}/events")]:
        response = api.send(method, path, raw=bundle)
        assert response.status_code == 413 and response.json()["code"] == "PAYLOAD_TOO_LARGE", path


@override_settings(WORKBENCH_RATE_LIMIT_PER_MINUTE=3)
def test_rate_limit_is_429_with_retry_after_per_token(api, reader, outsider):
    statuses = [api.get("/api/runs").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    limited = api.get("/api/runs")
    assert limited.json()["code"] == "RATE_LIMITED" and limited["Link"] == DESCRIBED_BY
    assert 1 <= int(limited["Retry-After"]) <= 66  # sliding window: up to one bucket (6 s) more than 60
    assert (
        reader.get("/api/runs").status_code == 200
    )  # another token of the same workspace has its own budget
    assert outsider.get("/api/runs").status_code == 200


@override_settings(WORKBENCH_RATE_LIMIT_PER_MINUTE=100, WORKBENCH_RATE_LIMIT_WORKSPACE_PER_MINUTE=4)
def test_rate_limit_per_workspace(api, reader, outsider):
    assert [api.get("/api/runs").status_code for _ in range(2)] == [200, 200]
    assert [reader.get("/api/runs").status_code for _ in range(3)] == [200, 200, 429]
    assert outsider.get("/api/runs").status_code == 200


def test_token_rate_limit_override(workspace):
    from accounts.tokens import create_token
    from tests.api.conftest import BearerClient

    client = BearerClient(
        create_token(workspace=workspace, name="slow", scopes=["read"], rate_limit=1).secret
    )
    assert [client.get("/api/runs").status_code for _ in range(2)] == [200, 429]


@pytest.mark.parametrize("path", ["/api/runs", "/api/health"])
def test_link_header_on_success(api, path):
    assert api.get(path)["Link"] == DESCRIBED_BY


def test_method_not_allowed_is_json(api):
    response = api.send("PATCH", "/api/bundles/verify", {})
    assert response.status_code == 405 and response.json()["code"] == "METHOD_NOT_ALLOWED"
    assert "POST" in response["Allow"] and response["Link"] == DESCRIBED_BY
