"""'Add to dataset' on a timeline event: the event detail links to an evals page (runs does not
import evals), whose form adds the event through the fromEvent action."""

from __future__ import annotations

import pytest
from django.test import Client

from evals import actions, selectors
from evals.models import Dataset


def _client(user, **kwargs) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_event_detail_links_to_the_add_event_form(alice, vera, charlie, workspace, recorded):
    run = recorded[0]
    owner = _client(alice)
    fragment = owner.get(f"/runs/{run.run_id}/events/3/detail/", HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200
    link = f"/evals/datasets/add-event/?run={run.run_id}&amp;seq=3"
    assert link.encode() in fragment.content
    dataset = actions.do_create_dataset(workspace=workspace, name="events")
    form = owner.get("/evals/datasets/add-event/", {"run": run.run_id, "seq": "3"})
    assert form.status_code == 200 and b"csrfmiddlewaretoken" in form.content
    response = owner.post(
        "/evals/datasets/add-event/", {"run": run.run_id, "seq": "3", "dataset": dataset.public_id}
    )
    assert response.status_code == 302 and response["Location"].endswith(f"/{dataset.public_id}/")
    dataset.refresh_from_db()
    (item,) = selectors.items_at(dataset, dataset.revision)
    assert item["source"]["runId"] == run.run_id and item["source"]["seq"] == 3
    # the same event again: not duplicated
    owner.post("/evals/datasets/add-event/", {"run": run.run_id, "seq": "3", "dataset": dataset.public_id})
    dataset.refresh_from_db()
    assert dataset.revision == 1
    # a new dataset by name
    owner.post("/evals/datasets/add-event/", {"run": run.run_id, "seq": "2", "new_name": "one event"})
    assert len(selectors.items_at(Dataset.objects.get(name="one event"), 1)) == 1
    # bad input: no dataset chosen (400), no such event or run (404), nothing added
    assert owner.post("/evals/datasets/add-event/", {"run": run.run_id, "seq": "3"}).status_code == 400
    for params in (
        {"run": run.run_id, "seq": "9999"},
        {"run": run.run_id, "seq": "x"},
        {"run": "run_nope", "seq": "1"},
        {},
    ):
        assert owner.get("/evals/datasets/add-event/", params).status_code == 404
    # a viewer may not add; an outsider does not see the run; no CSRF token, no write
    assert _client(vera).get("/evals/datasets/add-event/", {"run": run.run_id, "seq": "3"}).status_code == 403
    assert (
        _client(charlie).get("/evals/datasets/add-event/", {"run": run.run_id, "seq": "3"}).status_code == 404
    )
    outsider_post = _client(charlie).post(
        "/evals/datasets/add-event/", {"run": run.run_id, "seq": "3", "new_name": "stolen"}
    )
    assert outsider_post.status_code == 404 and not Dataset.objects.filter(name="stolen").exists()
    strict = _client(alice, enforce_csrf_checks=True)
    strict.post("/evals/datasets/add-event/", {"run": run.run_id, "seq": "4", "dataset": dataset.public_id})
    dataset.refresh_from_db()
    assert dataset.revision == 1
