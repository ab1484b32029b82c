"""openapi.json is plain JSON with no repeated member: Swagger UI's parser refuses duplicate keys."""

from __future__ import annotations

import json

import pytest


@pytest.mark.django_db
def test_openapi_json_has_no_duplicate_members(client):
    repeated: list[str] = []

    def pairs(items):
        keys = [key for key, _ in items]
        repeated.extend(key for i, key in enumerate(keys) if key in keys[:i])
        return dict(items)

    response = client.get("/api/openapi.json")
    assert response.status_code == 200
    json.loads(response.content, object_pairs_hook=pairs)
    assert repeated == []
