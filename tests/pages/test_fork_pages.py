"""Fork pages: "Replay/Branch from here" on every timeline event, the fork form (owners only),
the determinism report page; outsiders get 404."""

from __future__ import annotations

import pytest

from runs.models import Run, RunFork
from tests.pages.conftest import login


@pytest.mark.django_db
def test_timeline_links_and_owner_forks(client, alice, run, settings):
    login(client, alice)
    page = client.get(f"/runs/{run.run_id}/events/1/detail/", HTTP_HX_REQUEST="true").content.decode()
    assert f"/runs/{run.run_id}/fork/?mode=replay&amp;seq=1" in page
    assert f"/runs/{run.run_id}/fork/?mode=branch&amp;seq=1" in page
    form = client.get(f"/runs/{run.run_id}/fork/?mode=branch&seq=2")
    assert form.status_code == 200 and b"Branch from #2" in form.content
    response = client.post(f"/runs/{run.run_id}/fork/", {"mode": "replay", "from_seq": "2"})
    assert response.status_code == 302
    fork = RunFork.objects.get()
    assert response["Location"].endswith(f"/runs/{fork.run.run_id}/")
    detail = client.get(f"/runs/{fork.run.run_id}/").content.decode()
    assert "Determinism report" in detail
    report = client.get(f"/runs/{fork.run.run_id}/determinism/")
    assert report.status_code == 200 and b"determinism-score" in report.content
    bad = client.post(f"/runs/{run.run_id}/fork/", {"mode": "replay", "from_seq": "999"})
    assert bad.status_code == 200 and RunFork.objects.count() == 1
    assert Run.objects.get(pk=run.pk).last_seq == run.last_seq


@pytest.mark.django_db
def test_viewers_cannot_fork_and_outsiders_get_404(client, vera, charlie, run):
    login(client, vera)
    assert b"Only owners" in client.get(f"/runs/{run.run_id}/fork/").content
    assert client.post(f"/runs/{run.run_id}/fork/", {"mode": "replay"}).status_code == 403
    client.logout()
    login(client, charlie)
    assert client.get(f"/runs/{run.run_id}/fork/").status_code == 404
    assert client.post(f"/runs/{run.run_id}/fork/", {"mode": "replay"}).status_code == 404
    assert client.get(f"/runs/{run.run_id}/determinism/").status_code == 404
    assert RunFork.objects.count() == 0
