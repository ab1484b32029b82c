"""API fixtures: tokens of the acme workspace per scope set, an outsider's token, a bearer client."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client


class BearerClient:
    """Django's test client with a bearer token and JSON helpers."""

    def __init__(self, token: str | None) -> None:
        self.client = Client()
        self.token = token

    def _headers(self, headers: dict | None) -> dict:
        out = {}
        if self.token:
            out["Authorization"] = f"Bearer {self.token}"
        out.update(headers or {})
        return out

    def get(self, path: str, headers: dict | None = None, **params: Any):
        return self.client.get(path, params or None, headers=self._headers(headers))

    def send(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        headers: dict | None = None,
    ):
        data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
        return self.client.generic(
            method, path, data=data, content_type="application/json", headers=self._headers(headers)
        )

    def post(self, path: str, body: Any = None, **kw: Any):
        return self.send("POST", path, body, **kw)

    def put(self, path: str, body: Any = None, **kw: Any):
        return self.send("PUT", path, body, **kw)

    def delete(self, path: str, **kw: Any):
        return self.send("DELETE", path, None, **kw)


def _token(workspace, scopes, name="t"):
    from accounts.tokens import create_token

    return create_token(workspace=workspace, name=name, scopes=scopes).secret


@pytest.fixture
def full_token(workspace) -> str:
    return _token(workspace, ["read", "write", "review"], "full")


@pytest.fixture
def read_token(workspace) -> str:
    return _token(workspace, ["read"], "reader")


@pytest.fixture
def write_token(workspace) -> str:
    return _token(workspace, ["read", "write"], "writer")


@pytest.fixture
def review_token(workspace) -> str:
    return _token(workspace, ["read", "review"], "reviewer")


@pytest.fixture
def outsider_token(other_workspace) -> str:
    return _token(other_workspace, ["read", "write", "review"], "outsider")


@pytest.fixture
def api(full_token) -> BearerClient:
    return BearerClient(full_token)


@pytest.fixture
def reader(read_token) -> BearerClient:
    return BearerClient(read_token)


@pytest.fixture
def writer(write_token) -> BearerClient:
    return BearerClient(write_token)


@pytest.fixture
def reviewer(review_token) -> BearerClient:
    return BearerClient(review_token)


@pytest.fixture
def outsider(outsider_token) -> BearerClient:
    return BearerClient(outsider_token)


@pytest.fixture
def anonymous() -> BearerClient:
    return BearerClient(None)


@pytest.fixture
def started_run(api, workflow) -> str:
    response = api.post("/api/runs", {"workflow": workflow, "runId": "run_api_1", "tags": ["api"]})
    assert response.status_code == 201, response.content
    return response.json()["runId"]
