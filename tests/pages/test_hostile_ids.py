"""Ids with any characters are safe everywhere: pages, URLs, export headers; control characters
are refused with INVALID_RUN_ID wherever a run is created."""

from __future__ import annotations

import pytest
from django.urls import reverse

from runs import actions
from runs.ids import RunIdConverter, content_disposition, run_id_problem
from tests.pages.conftest import login

ODD_IDS = ["a/b", "a/b/timeline", "50%/x", 'q"uote; name=evil', "spa ce", "ünï/cødé", "?x=1#y", "~%2F"]


@pytest.mark.parametrize("run_id", ODD_IDS)
def test_odd_ids_round_trip_through_pages_and_export(client, alice, workspace, workflow, run_id):
    actions.do_start_run(workspace=workspace, workflow=workflow, run_id=run_id, actor="t")
    login(client, alice)
    listing = client.get("/runs/")
    assert listing.status_code == 200  # one odd id used to make the whole list a 500
    url = reverse("runs:detail", args=[run_id])
    assert url in listing.content.decode()
    page = client.get(url)
    assert page.status_code == 200 and page.context["run"].run_id == run_id
    assert client.get(reverse("runs:timeline", args=[run_id]), HTTP_HX_REQUEST="true").status_code == 200
    export = client.get(reverse("runs:export", args=[run_id]))
    assert export.status_code == 200
    header = export["Content-Disposition"]
    assert "\r" not in header and "\n" not in header
    assert header.count(";") == 2  # attachment; filename=...; filename*=... (nothing injected)


def test_converter_never_puts_a_raw_slash_in_the_routed_segment():
    converter = RunIdConverter()
    for run_id in ODD_IDS:
        segment = converter.to_url(run_id)
        assert "/" not in segment and converter.to_python(segment) == run_id


def test_content_disposition_has_an_ascii_fallback_and_rfc6266_name():
    header = content_disposition('r"\r\nX-Evil: 1; ü.bundle.json')
    assert header.startswith('attachment; filename="')
    assert "\r" not in header and "\n" not in header and '"\r' not in header
    assert "filename*=UTF-8''r%22%0D%0AX-Evil%3A%201%3B%20%C3%BC.bundle.json" in header


@pytest.mark.parametrize("bad", ["crlf\r\nid", "tab\tid", "nul\x00", "del\x7f", "c1\x85", "ls\u2028"])
def test_control_characters_are_refused_with_a_code(api_token_client, workflow, bad):
    assert run_id_problem(bad) and run_id_problem("x" * 201) and run_id_problem("fine/id ü") is None
    response = api_token_client.post("/api/runs", {"workflow": workflow, "runId": bad})
    assert response.status_code == 400 and response.json()["code"] == "INVALID_RUN_ID"


def test_control_characters_are_refused_on_import(workspace, workflow):
    import orjson

    from runs.models import Run
    from runs.selectors.bundles import export_bundle_bytes

    run = actions.do_start_run(workspace=workspace, workflow=workflow, run_id="plain", actor="t")
    bundle = orjson.loads(export_bundle_bytes(Run.objects.get(pk=run.pk)))
    actions.do_delete_run(workspace=workspace, run_id="plain")
    bundle["run"]["id"] = "bad\r\nid"
    bundle.pop("integrity", None)
    from runs.protocol.canonical import canonical_bytes
    from runs.protocol.integrity import seal_bundle

    with pytest.raises(actions.ActionError) as exc:
        actions.do_import_bundle(workspace=workspace, data=canonical_bytes(seal_bundle(bundle)))
    assert exc.value.code == "INVALID_RUN_ID"
    assert not Run.objects.exists()


@pytest.fixture
def api_token_client(workspace):
    from accounts.tokens import create_token
    from tests.api.conftest import BearerClient

    return BearerClient(create_token(workspace=workspace, name="t", scopes=["read", "write"]).secret)


DOT_SEGMENTS = [".", "..", "%2e", "%2E%2e", ".%2e", "%252e%252e"]


@pytest.mark.parametrize("dots", DOT_SEGMENTS)
def test_dot_segments_are_refused_at_creation(api_token_client, workspace, workflow, dots):
    """Issue 23 §5: a run ``..`` was created, then every REST route of it answered 404."""
    from runs.models import Run

    assert run_id_problem(dots)
    response = api_token_client.post("/api/runs", {"workflow": workflow, "runId": dots})
    assert response.status_code == 400 and response.json()["code"] == "INVALID_RUN_ID"
    put = api_token_client.put(f"/api/runs/{dots}", {"workflow": workflow})
    assert put.status_code in (400, 404, 405)
    with pytest.raises(actions.ActionError) as exc:
        actions.do_start_run(workspace=workspace, workflow=workflow, run_id=dots, actor="t")
    assert exc.value.code == "INVALID_RUN_ID"
    assert not Run.objects.exists()


@pytest.mark.parametrize("fine", ["...", ".a", "a.", "..a", "%2e%2e%2e", "a/..", "./x"])
def test_ids_with_dots_that_are_no_dot_segment_stay_fine(fine):
    assert run_id_problem(fine) is None
