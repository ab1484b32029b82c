"""PUT then GET of a RunStoreState is byte-equal to the reference's JSON.stringify of it."""

from __future__ import annotations

import pytest

from tests.jstext import member_text


def _bodies(conformance_dir):
    paths = sorted((conformance_dir / "expected").glob("*.runstore.json"))
    assert paths
    return [(p.name, member_text(p.read_text(encoding="utf-8"), "body")) for p in paths]


@pytest.mark.django_db
def test_put_then_get_is_byte_equal(api, conformance_dir):
    import json

    for name, text in _bodies(conformance_dir):
        run_id = json.loads(text)["run"]["id"]
        put = api.put(f"/api/runs/{run_id}", raw=text.encode())
        assert put.status_code == 201, (name, put.content)
        got = api.get(f"/api/runs/{run_id}")
        assert got.status_code == 200
        assert got.content.decode() == text, name
