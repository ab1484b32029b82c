"""Runs list -> dataset: the ticked runs, or exactly every run matching the list's filter across
all its pages (the Langfuse #16237 bug: "select all" added the unfiltered traces)."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.test import Client

from evals import actions as eval_actions
from evals import selectors as eval_selectors
from evals.models import Dataset

PER_PAGE = 4
PICKED = {0, 1, 4, 6, 7, 9}  # on all 3 pages of the list; filtered, 2 pages of their own


@pytest.fixture
def ten_runs(make_run, monkeypatch):
    monkeypatch.setattr("runs.pages.run_list.RUNS_PER_PAGE", PER_PAGE)
    for i in range(10):
        make_run(f"run_list_ds_{i}", tags=("pick",) if i in PICKED else ("other",), finish_parse=False)
    return [f"run_list_ds_{i}" for i in range(10)]


def _sources(dataset: Dataset) -> set[str]:
    dataset.refresh_from_db()
    return {item["source"]["runId"] for item in eval_selectors.items_at(dataset, dataset.revision)}


def _pages(client: Client, query: str) -> list[set[str]]:
    """The run ids of each page of the runs list for a filter, following 'Older runs'."""
    pages, url = [], "/runs/" + query
    while url:
        html = client.get(url).content.decode()
        pages.append(set(re.findall(r'name="run" value="([^"]+)"', html)))
        more = re.search(r'<a href="([^"]+)">Older runs', html)
        url = unescape(more.group(1)) if more else ""
    return pages


@pytest.mark.django_db
def test_all_matching_adds_exactly_the_filtered_runs_across_pages(client, alice, ten_runs):
    client.force_login(alice)
    everything = _pages(client, "?")
    assert len(everything) == 3  # 10 runs, 4 a page
    filtered = _pages(client, "?tag=pick")
    assert [len(p) for p in filtered] == [PER_PAGE, 2]  # the filter itself spans two pages
    picked = {ten_runs[i] for i in PICKED}
    assert set().union(*filtered) == picked
    # the picked runs are spread over all three pages of the unfiltered list
    assert all(page & picked for page in everything)

    page = client.get("/runs/", {"status": "running"}).content.decode()
    assert "Add all 10 runs matching this filter to a dataset" in page  # several pages: counted
    # a tag is not counted on the list (no index range answers it: runs.selectors.run_list.
    # capped_count); the form says how many
    assert "Add all runs matching this filter" in client.get("/runs/?tag=pick").content.decode()
    link = re.search(
        r'href="(/evals/datasets/add-runs/\?[^"]+)"', client.get("/runs/?tag=pick").content.decode()
    )
    assert link and "all=1" in link.group(1) and "tag=pick" in link.group(1)
    form = client.get(unescape(link.group(1)))
    assert form.status_code == 200 and b"All <strong>6</strong> runs matching this filter" in form.content

    # POST: the server evaluates the filter again; a run id smuggled into the form is not added
    response = client.post(
        "/evals/datasets/add-runs/",
        {"all": "1", "tag": "pick", "q": "", "new_name": "picked", "run": ten_runs[2]},
    )
    assert response.status_code == 302
    dataset = Dataset.objects.get(name="picked")
    assert _sources(dataset) == picked  # no more (not the workspace), no fewer (not page 1)
    assert dataset.revision == 1
    # the same filter again adds nothing (the sources are held already)
    client.post("/evals/datasets/add-runs/", {"all": "1", "tag": "pick", "dataset": dataset.public_id})
    dataset.refresh_from_db()
    assert dataset.revision == 1 and len(_sources(dataset)) == len(PICKED)

    # a filter across pages: every running run (all 10, three pages of the list)
    client.post("/evals/datasets/add-runs/", {"all": "1", "status": "running", "new_name": "all running"})
    assert _sources(Dataset.objects.get(name="all running")) == set(ten_runs)
    # a search (the list's text match) with a tag: their intersection only
    client.post("/evals/datasets/add-runs/", {"all": "1", "q": "ds_", "tag": "other", "new_name": "searched"})
    assert _sources(Dataset.objects.get(name="searched")) == set(ten_runs) - picked


@pytest.mark.django_db
def test_ticked_runs_add_exactly_those(client, alice, workspace, ten_runs):
    client.force_login(alice)
    dataset = eval_actions.do_create_dataset(workspace=workspace, name="ticked")
    ticked = [ten_runs[2], ten_runs[5]]
    form = client.get("/evals/datasets/add-runs/", {"run": ticked})
    assert form.status_code == 200 and b"<strong>2</strong> runs ticked" in form.content
    response = client.post("/evals/datasets/add-runs/", {"run": ticked, "dataset": dataset.public_id})
    assert response.status_code == 302
    assert _sources(dataset) == set(ticked)
    # nothing ticked, no dataset chosen, an unknown run: 400, nothing added
    assert client.post("/evals/datasets/add-runs/", {"dataset": dataset.public_id}).status_code == 400
    assert client.post("/evals/datasets/add-runs/", {"run": ticked}).status_code == 400
    bad = client.post("/evals/datasets/add-runs/", {"run": ["run_missing"], "new_name": "never"})
    assert bad.status_code == 400 and b"no run" in bad.content
    assert not Dataset.objects.filter(name="never").exists()  # the new dataset rolled back too
    dataset.refresh_from_db()
    assert dataset.revision == 1
    # no filter matches: 400
    assert client.post("/evals/datasets/add-runs/", {"all": "1", "tag": "none"}).status_code == 400


@pytest.mark.django_db
def test_add_runs_needs_edit_dataset_csrf_and_the_workspace(alice, vera, charlie, workspace, ten_runs):
    dataset = eval_actions.do_create_dataset(workspace=workspace, name="guarded")
    viewer = Client()
    viewer.force_login(vera)
    assert viewer.get("/evals/datasets/add-runs/", {"run": ten_runs[0]}).status_code == 403
    assert (
        viewer.post(
            "/evals/datasets/add-runs/", {"run": ten_runs[0], "dataset": dataset.public_id}
        ).status_code
        == 403
    )
    outsider = Client()
    outsider.force_login(charlie)
    response = outsider.post("/evals/datasets/add-runs/", {"all": "1", "tag": "pick", "new_name": "theirs"})
    assert response.status_code == 400  # charlie's workspace has no such runs: nothing of acme's
    assert not Dataset.objects.filter(name="theirs").exists()
    assert (
        outsider.post(
            "/evals/datasets/add-runs/", {"run": ten_runs[0], "dataset": dataset.public_id}
        ).status_code
        == 400
    )
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert (
        strict.post(
            "/evals/datasets/add-runs/", {"run": ten_runs[0], "dataset": dataset.public_id}
        ).status_code
        == 403
    )
    dataset.refresh_from_db()
    assert dataset.revision == 0
