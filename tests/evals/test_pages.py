"""Dataset and experiment pages: what they show, forms with CSRF, 404 for another workspace's."""

from __future__ import annotations

import pytest
from django.test import Client

from evals import actions
from evals.runner import run_experiment


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_dataset_pages_create_fill_and_show(alice, vera, recorded):
    owner = _client(alice)
    response = owner.post("/evals/datasets/", {"name": "drafts", "description": "decided"})
    assert response.status_code == 302
    detail = response["Location"]
    response = owner.post(detail, {"step_id": "draft"})
    assert response.status_code == 200 and b"3 items added (revision 1)" in response.content
    page = owner.get(detail, {"asOf": "0"})
    assert b"Revision 0 of 1: 0 items" in page.content
    assert b"approved" in owner.get(detail).content
    viewer = _client(vera)
    assert viewer.get(detail).status_code == 200
    assert viewer.post(detail, {"step_id": "draft"}).status_code == 403
    assert b"Datasets" in owner.get("/evals/datasets/").content
    assert owner.post("/evals/datasets/", {"name": ""}).status_code == 400


@pytest.mark.django_db
def test_compare_page_sorts_regressions_first_and_filters(alice, charlie, workspace, gate_dataset):
    baseline = run_experiment(
        actions.do_create_experiment(workspace=workspace, dataset=gate_dataset, name="base", change={}).pk
    )
    candidate = run_experiment(
        actions.do_create_experiment(
            workspace=workspace,
            dataset=gate_dataset,
            name="haiku",
            change={"configurable": {"draftModel": "claude-haiku-4-5"}},
            baseline=baseline,
        ).pk
    )
    owner = _client(alice)
    url = f"/evals/experiments/{candidate.public_id}/"
    page = owner.get(url)
    assert page.status_code == 200
    assert page.content.count(b'class="regressed"') == 3
    assert b"3 regressions shown" in page.content
    assert b"Output changed" in page.content
    assert owner.get(f"/evals/experiments/{baseline.public_id}/", {"regressions": "1"}).status_code == 200
    same = owner.get(url, {"with": candidate.public_id})  # itself: left out, nothing compared
    assert same.status_code == 200
    outsider = _client(charlie)
    assert outsider.get(url).status_code == 404
    assert outsider.get(f"/evals/datasets/{gate_dataset.public_id}/").status_code == 404
    assert owner.get(url, {"with": "exp_missing"}).status_code == 404


@pytest.mark.django_db
def test_upload_and_judge_calibration(alice, workspace):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.utils import timezone

    from evals.models import Experiment, ExperimentItem

    owner = _client(alice)
    dataset = actions.do_create_dataset(workspace=workspace, name="labelled")
    upload = SimpleUploadedFile(
        "items.csv",
        b"id,input,expected,label\na,1,x,approved\nb,2,y,approved\nc,3,z,rejected\nd,4,w,rejected\n",
        content_type="text/csv",
    )
    response = owner.post(f"/evals/datasets/{dataset.public_id}/", {"file": upload})
    assert b"4 items added" in response.content
    experiment = Experiment.objects.create(
        public_id="exp_calib",
        workspace=workspace,
        dataset=dataset,
        as_of_revision=1,
        name="judge",
        status="completed",
        created_at=timezone.now(),
    )
    # the judge passes a, b and c: agrees on a, b (approved) and d (rejected), not on c
    for key, score in {"a": 1.0, "b": 0.9, "c": 0.8, "d": 0.1}.items():
        ExperimentItem.objects.create(
            experiment=experiment,
            item_key=key,
            status="completed",
            score=score,
            score_detail={"history": {"function:judge@1": score}},
        )
    page = owner.get("/evals/experiments/exp_calib/").content.decode()
    assert "Judge calibration" in page and "function:judge@1" in page
    assert "0.500" in page  # kappa: observed 0.75, expected 0.5
    assert "2 / 1 / 1 / 0" in page
