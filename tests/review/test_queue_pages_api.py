"""Annotation queue pages and REST: roles (viewers cannot review, reviewers cannot edit queues,
owners manage), blind mode, adding from a run page and from the filtered runs list, progress."""

from __future__ import annotations

import json
import re

import pytest

from tests.pages.conftest import login

pytestmark = pytest.mark.django_db

CONFIGS = "correct: 1-5 -- facts right\ntone: good | bad\nsend: yes/no"


@pytest.fixture
def queue(client, alice):
    login(client, alice)
    response = client.post(
        "/review/",
        {
            "name": "Letters",
            "configs": CONFIGS,
            "reviews_per_item": "2",
            "reservation_minutes": "5",
            "blind": "on",
        },
    )
    assert response.status_code == 302, response.content.decode()[:500]
    from review.models import Queue

    client.logout()
    return Queue.objects.get(name="Letters")


def test_owner_creates_a_queue_with_langfuse_configs_and_errors_in_words(client, alice, queue):
    configs = list(
        queue.score_configs.values_list("name", "data_type", "min_value", "max_value", "description")
    )
    assert configs == [
        ("correct", "NUMERIC", 1, 5, "facts right"),
        ("tone", "CATEGORICAL", None, None, ""),
        ("send", "BOOLEAN", None, None, ""),
    ]
    assert queue.reviews_per_item == 2 and queue.reservation_seconds == 300 and queue.blind
    login(client, alice)
    page = client.post("/review/", {"name": "", "configs": CONFIGS})
    assert page.status_code == 422
    assert 'id="q-name-err">A queue needs a name (1-200 characters).</p>' in page.content.decode()


def test_viewer_cannot_review_reviewer_cannot_manage(client, bob, vera, queue, make_run):
    make_run("run_0")
    login(client, vera)
    assert client.get(f"/review/{queue.queue_id}/").status_code == 200  # viewers may look
    assert client.post(f"/review/{queue.queue_id}/next/").status_code == 403
    login(client, bob)
    assert client.post("/review/", {"name": "Mine", "configs": CONFIGS}).status_code == 403
    assert client.post(f"/review/{queue.queue_id}/delete/").status_code == 403
    assert client.post("/review/add/run_0/", {"queue": queue.queue_id}).status_code == 403
    assert client.post(f"/review/{queue.queue_id}/next/").status_code == 302


def test_review_flow_on_pages_with_blind_mode_and_the_timeline_partial(client, alice, bob, queue, make_run):
    from runs.models import Event

    make_run("run_0")
    login(client, alice)
    assert client.post("/review/add/run_0/", {"queue": queue.queue_id}).status_code == 302
    # bob reviews first
    login(client, bob)
    to_item = client.post(f"/review/{queue.queue_id}/next/")["Location"]
    page = client.get(to_item).content.decode()
    assert 'id="timeline-list"' in page and "data-queue-form" in page  # the run page's partial
    # "Add to dataset": the item's run goes to the evals page that adds runs (review never imports evals)
    assert 'href="/evals/datasets/add-runs/?run=run_0">Add to dataset</a>' in page
    login(client, alice)
    assert client.get("/evals/datasets/add-runs/?run=run_0").status_code == 200
    login(client, bob)
    bad = client.post(
        to_item, {"op": "submit", "score-correct": "9", "score-tone": "good", "score-send": "true"}
    )
    assert bad.status_code == 422
    assert re.search(
        r'<p class="field-error" id="err-1">Correct: enter a value of at most 5.</p>', bad.content.decode()
    )
    done = client.post(
        to_item, {"op": "submit", "score-correct": "4", "score-tone": "good", "score-send": "true"}
    )
    assert done.status_code == 302
    # alice (second reviewer of 2) does not see bob's scores until she submits (blind)
    login(client, alice)
    to_item_a = client.post(f"/review/{queue.queue_id}/next/")["Location"]
    assert to_item_a == to_item
    page = client.get(to_item_a).content.decode()
    assert "Scores given" not in page and "Blind queue" in page
    client.post(to_item_a, {"op": "submit", "score-correct": "2", "score-tone": "bad", "score-send": "false"})
    page = client.get(to_item_a).content.decode()
    assert "Scores given" in page and "bob: correct = 4" in page
    assert Event.objects.filter(run__run_id="run_0", type="annotation").count() == 2
    detail = client.get(f"/review/{queue.queue_id}/").content.decode()
    assert "2 of 2 reviews done" in detail and "shown once 20 items" in detail


def test_skip_moves_on(client, bob, queue, make_run):
    make_run("run_0")
    make_run("run_1")
    from review.actions import do_add_items

    do_add_items(queue=queue, items=[{"runId": "run_0"}, {"runId": "run_1"}])
    login(client, bob)
    first = client.post(f"/review/{queue.queue_id}/next/")["Location"]
    second = client.post(first, {"op": "skip"})["Location"]
    assert second != first and "/items/" in second


def test_add_exactly_the_filtered_runs_across_pages(client, alice, queue, make_run):
    from review.models import Item

    for i in range(3):
        make_run(f"run_tagged_{i}", tags=("nightly",))
    make_run("run_other", tags=("weekly",))
    login(client, alice)
    form = client.get("/review/add-runs/?tag=nightly").content.decode()
    assert 'name="tag" value="nightly"' in form
    assert client.post("/review/add-runs/", {"tag": "nightly", "queue": queue.queue_id}).status_code == 302
    assert sorted(Item.objects.values_list("run__run_id", flat=True)) == [f"run_tagged_{i}" for i in range(3)]


def test_outsider_gets_404(client, charlie, queue):
    login(client, charlie)
    assert client.get(f"/review/{queue.queue_id}/").status_code == 404
    assert client.post(f"/review/{queue.queue_id}/next/").status_code == 404


def test_rest_create_add_claim_score_progress(client, alice, bob, workspace, make_run):
    from accounts.tokens import create_token
    from tests.api.conftest import BearerClient

    make_run("run_0")
    api = BearerClient(create_token(workspace=workspace, name="pipe", scopes=["read", "write"]).secret)
    created = api.post(
        "/api/review/queues",
        {"name": "Api", "scoreConfigs": [{"name": "ok", "dataType": "BOOLEAN", "description": "fine?"}]},
    )
    assert created.status_code == 201, created.content
    qid = created.json()["id"]
    assert created.json()["reviewers"] == [] and created.json()["defaultDataset"] == ""
    assigned = api.post(
        "/api/review/queues",
        {
            "name": "Bob's",
            "reviewers": ["bob"],
            "defaultDataset": "ds_x",
            "scoreConfigs": [{"name": "ok", "dataType": "BOOLEAN"}],
        },
    )
    assert assigned.status_code == 201 and assigned.json()["reviewers"] == ["bob"], assigned.content
    stranger = api.post(
        "/api/review/queues",
        {"name": "No", "reviewers": ["zed"], "scoreConfigs": [{"name": "ok", "dataType": "BOOLEAN"}]},
    )
    assert stranger.status_code == 400 and stranger.json()["code"] == "INVALID_INPUT"
    assert api.post(f"/api/review/queues/{qid}/items", {"items": [{"runId": "run_0"}]}).json() == {
        "added": 1,
        "alreadyQueued": 0,
    }
    refused = api.post(f"/api/review/queues/{qid}/claim", {})
    assert refused.status_code == 403  # a token holds no review scope here (and is no person)
    client.force_login(bob)
    claimed = client.post(f"/api/review/queues/{qid}/claim", "{}", content_type="application/json")
    assert claimed.status_code == 200, claimed.content
    item = claimed.json()
    assert item["runId"] == "run_0" and item["kind"] == "run"
    scored = client.post(
        f"/api/review/queues/{qid}/scores",
        json.dumps({"itemId": item["id"], "scores": {"ok": True}}),
        content_type="application/json",
    )
    assert scored.status_code == 201, scored.content
    assert scored.json()["annotationSeq"] > 0
    assert (
        client.post(f"/api/review/queues/{qid}/claim", "{}", content_type="application/json").status_code
        == 204
    )
    read = api.get(f"/api/review/queues/{qid}").json()
    assert read["progress"]["reviews_done"] == 1 and read["progress"]["reviewers"][0]["reviewer"] == "bob"
    schema = client.get("/api/openapi.json").json()
    assert "/api/review/queues/{queue_id}/claim" in schema["paths"]


def test_run_page_and_run_list_offer_the_queue_to_managers_only(client, alice, bob, make_run):
    make_run("run_0")
    login(client, alice)
    assert 'id="add-to-queue"' in client.get("/runs/run_0/").content.decode()
    listing = client.get("/runs/?tag=nightly").content.decode()
    assert 'id="add-listed-to-queue"' in listing and 'name="tag" value="nightly"' in listing
    login(client, bob)
    assert 'id="add-to-queue"' not in client.get("/runs/run_0/").content.decode()
    assert 'id="add-listed-to-queue"' not in client.get("/runs/").content.decode()
