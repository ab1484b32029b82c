"""Timeline navigation: running runs open at the tail, pagers push the URL, no empty Earlier page."""

from __future__ import annotations

import pytest

from tests.pages.conftest import login

pytestmark = pytest.mark.django_db


def _grow(run, workspace, n):
    from runs import actions
    from runs.engine import commands as c

    actions.do_commands(
        workspace=workspace,
        run_id=run.run_id,
        actor="pipeline",
        commands=[c.Annotate(text=f"n{i}") for i in range(n)],
    )
    run.refresh_from_db()


def test_running_run_opens_at_its_tail_with_pagers_top_and_bottom(client, alice, run, workspace):
    _grow(run, workspace, 250)
    login(client, alice)
    html = client.get(f"/runs/{run.run_id}/").content.decode()
    assert f'id="seq-{run.last_seq}"' in html and 'id="seq-1"' not in html
    assert 'aria-label="Timeline pages (top)"' in html and 'aria-label="Timeline pages (bottom)"' in html
    assert 'hx-push-url="/runs/' in html and "show:#timeline:top" in html
    first = client.get(f"/runs/{run.run_id}/", {"after": 0}).content.decode()
    assert 'id="seq-1"' in first  # an explicit window is kept


def test_filtered_first_page_offers_no_empty_earlier_page(client, alice, run, workspace):
    _grow(run, workspace, 5)
    login(client, alice)
    html = client.get(f"/runs/{run.run_id}/", {"type": "annotation", "after": 0}).content.decode()
    assert "← Earlier" not in html


def test_search_terms_are_highlighted(client, alice, run, workspace):
    _grow(run, workspace, 3)
    login(client, alice)
    html = client.get(f"/runs/{run.run_id}/", {"q": "n1"}).content.decode()
    assert "<mark>n1</mark>" in html
