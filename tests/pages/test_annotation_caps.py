"""A run's annotations cannot make its page huge: the header shows a bounded number of them, each
cut to a bounded length, and links to a paged list where every annotation can be read in full."""

from __future__ import annotations

import json

import pytest

from tests.pages.conftest import login

pytestmark = pytest.mark.django_db

HUGE = 3_000_000  # characters: large enough that an uncapped page is obvious, small enough to be quick
PAGE_BUDGET = 400_000  # bytes: the page without annotations is far below this


def _import_with_annotations(run, workspace, annotations: list[dict], run_id: str = "annotated"):
    from runs import actions
    from runs.protocol.integrity import seal_bundle
    from runs.selectors.bundles import build_bundle

    bundle = build_bundle(run)
    bundle["run"] = {**bundle["run"], "id": run_id, "annotations": annotations}
    bundle["trace"] = [{**event, "runId": run_id} for event in bundle["trace"]]
    bundle.pop("integrity", None)
    data = json.dumps(seal_bundle(bundle)).encode()
    return actions.do_import_bundle(workspace=workspace, data=data, actor="user:alice")


def _annotate(run, workspace, text: str) -> None:
    from runs import actions
    from runs.engine import commands as c

    actions.do_command(
        workspace=workspace, run_id=run.run_id, command=c.Annotate(text=text), actor="user:alice"
    )


def test_a_huge_header_annotation_does_not_make_the_page_huge(client, alice, run, workspace):
    huge = "A" * HUGE
    annotations = [{"at": "2026-01-01T00:00:00Z", "text": huge}] + [
        {"at": "2026-01-01T00:00:00Z", "text": f"short note {i}"} for i in range(200)
    ]
    imported = _import_with_annotations(run, workspace, annotations)
    page = login(client, alice).get(f"/runs/{imported.run_id}/")
    assert page.status_code == 200
    assert len(page.content) < PAGE_BUDGET, len(page.content)
    html = page.content.decode()
    assert "short note 0" in html
    assert "short note 199" not in html  # only the first ones are shown
    assert "201 annotations" in html
    assert f"/runs/{imported.run_id}/annotations/" in html  # the rest is a link away


def test_huge_annotation_events_are_cut_on_the_run_page(client, alice, run, workspace):
    for i in range(3):
        _annotate(run, workspace, f"event note {i} " + "B" * HUGE)
    page = login(client, alice).get(f"/runs/{run.run_id}/")
    assert page.status_code == 200
    assert len(page.content) < PAGE_BUDGET, len(page.content)
    assert "event note 2" in page.content.decode()


def test_the_annotations_page_lists_every_annotation_paged_and_bounded(client, alice, run, workspace):
    annotations = [{"at": "2026-01-01T00:00:00Z", "text": f"note {i:03d}"} for i in range(120)]
    annotations.append({"at": "2026-01-02T00:00:00Z", "text": "C" * HUGE})
    imported = _import_with_annotations(run, workspace, annotations)
    _annotate(imported, workspace, "an event note")
    c = login(client, alice)
    first = c.get(f"/runs/{imported.run_id}/annotations/")
    assert first.status_code == 200
    html = first.content.decode()
    assert "note 000" in html and "note 049" in html and "note 050" not in html
    last = c.get(f"/runs/{imported.run_id}/annotations/", {"page": 3})
    assert last.status_code == 200
    assert "note 119" in last.content.decode()
    assert "an event note" in last.content.decode()  # notes follow the run's own annotations
    assert len(last.content) < PAGE_BUDGET  # the huge one is cut here too...
    full = c.get(f"/runs/{imported.run_id}/annotations/", {"page": 3, "full": 120})
    assert full.status_code == 200  # ...and readable whole on its own, as text
    assert full["Content-Type"].startswith("text/plain")
    assert full.content == b"C" * HUGE


@pytest.mark.parametrize(
    "query", [{"page": "0"}, {"page": "x"}, {"page": "99999999999999999999"}, {"full": "-1"}]
)
def test_bad_paging_is_not_an_error(client, alice, run, query):
    response = login(client, alice).get(f"/runs/{run.run_id}/annotations/", query)
    assert response.status_code in (200, 404)


def test_an_outsider_gets_404(client, run, django_user_model):
    charlie = django_user_model.objects.create_user("charlie", password="charlie-password-123")
    assert login(client, charlie).get(f"/runs/{run.run_id}/annotations/").status_code == 404


@pytest.mark.parametrize(
    "text",
    [
        "plain",
        'quo"te\\back',
        "é😀 emoji",
        "\u2028 line sep",
        "x" * 20_000,
        "😀" * 9000,
        '"' * 9000,
        "a\x01b\nc" * 3000,
    ],
)
def test_a_note_preview_from_a_cut_body_is_a_prefix_of_its_text(text):
    from runs.protocol.canonical import wire_bytes
    from runs.selectors.annotations import BODY_PREFIX, text_in_json_prefix

    body = wire_bytes({"eventId": "e1", "tags": ["t"], "text": text, "type": "annotation"}).decode()
    for cut in (len(body), BODY_PREFIX, 40, 37, 33):
        preview = text_in_json_prefix(body[:cut])
        preview.encode("utf-8")  # always writable (no lone surrogate)
        assert text.startswith(preview)
        assert cut < len(body) or preview == text


def test_the_pager_walks_notes_by_keyset_both_ways(client, alice, run, workspace, monkeypatch):
    """Next carries the last note's seq (after=), Previous the first's (before=): the notes of a page
    reached by the links are a range of the (run, type, seq) index, and the same as by page number."""
    import re
    from html import unescape

    monkeypatch.setattr("runs.selectors.annotations.PAGE_SIZE", 4)
    for i in range(11):
        _annotate(run, workspace, f"keyset note {i:02d}")
    c = login(client, alice)
    url, forward = f"/runs/{run.run_id}/annotations/", []
    while url:
        html = c.get(url).content.decode()
        forward.append(re.findall(r"keyset note (\d\d)", html))
        nxt = re.search(r'<a href="([^"]+)" rel="next">', html)
        url = f"/runs/{run.run_id}/annotations/" + unescape(nxt.group(1)) if nxt else ""
        assert not nxt or "after=" in nxt.group(1) or forward[-1] == []
    assert [n for page in forward for n in page] == [f"{i:02d}" for i in range(11)]
    by_number = [
        re.findall(
            r"keyset note (\d\d)", c.get(f"/runs/{run.run_id}/annotations/", {"page": p}).content.decode()
        )
        for p in range(1, len(forward) + 1)
    ]
    assert by_number == forward
    html = c.get(f"/runs/{run.run_id}/annotations/", {"page": len(forward)}).content.decode()
    backward = []
    while True:
        backward.insert(0, re.findall(r"keyset note (\d\d)", html))
        prev = re.search(r'<a href="([^"]+)" rel="prev">', html)
        if not prev:
            break
        html = c.get(f"/runs/{run.run_id}/annotations/" + unescape(prev.group(1))).content.decode()
    assert backward == forward
