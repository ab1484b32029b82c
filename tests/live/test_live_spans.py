"""The span tree follows a running run (issue 27): a live update carries the spans its events start
or end, as a <template class="live-spans"> that static/workbench/trace.js merges into the tree."""

from __future__ import annotations

import orjson
import pytest

from runs.live.fragments import render_fragments

pytestmark = pytest.mark.django_db


def _html(fragment) -> str:
    return orjson.loads(f'"{fragment.encoded}"')


def _cmd(workspace, run_id, *commands):
    from runs import actions

    actions.do_commands(workspace=workspace, run_id=run_id, commands=list(commands), actor="pipeline")


def test_no_span_event_no_span_fragment(workspace, workflow):
    from runs import actions
    from runs.engine import commands as c

    run = actions.do_start_run(workspace=workspace, workflow=workflow, run_id="run_ls_none")
    _cmd(workspace, "run_ls_none", c.Annotate(text="a"))
    run.refresh_from_db()
    assert render_fragments(run_pk=run.pk, role="viewer", after_seq=0, upto_seq=run.last_seq).spans is None


def test_first_spans_bring_the_whole_panel_then_nodes_and_ends(workspace, workflow):
    from runs import actions
    from runs.engine import commands as c

    run = actions.do_start_run(workspace=workspace, workflow=workflow, run_id="run_ls")
    before = run.last_seq
    _cmd(workspace, "run_ls", c.StartSpan(name="batch", span_id="batch"))
    run.refresh_from_db()
    first = _html(
        render_fragments(run_pk=run.pk, role="viewer", after_seq=before, upto_seq=run.last_seq).spans
    )
    assert first.startswith('<template class="live-spans" data-section>')
    assert 'id="trace"' in first and 'data-span-id="batch"' in first
    # later updates: new nodes with their parent, ends of spans shown before, the failed count
    at = run.last_seq
    _cmd(
        workspace,
        "run_ls",
        c.StartSpan(name="posting <1>", span_id="p1", parent_span_id="batch"),
        c.StartSpan(name="posting 2", span_id="p2", parent_span_id="batch"),
        c.EndSpan(span_id="p2", status="error", error={"message": "timeout"}),
    )
    run.refresh_from_db()
    update = render_fragments(run_pk=run.pk, role="viewer", after_seq=at, upto_seq=run.last_seq)
    html = _html(update.spans)
    assert "data-section" not in html
    assert html.count('class="sn sn-') == 2 and 'data-parent="batch"' in html
    assert "posting &lt;1&gt;" in html and "<1>" not in html  # escaped
    assert 'class="sn sn-error"' in html and 'class="sn sn-open"' in html
    assert '<strong id="trace-failed">1 failed span</strong>' in html
    at = run.last_seq
    _cmd(workspace, "run_ls", c.EndSpan(span_id="p1", status="ok"), c.EndSpan(span_id="batch", status="ok"))
    run.refresh_from_db()
    html = _html(render_fragments(run_pk=run.pk, role="viewer", after_seq=at, upto_seq=run.last_seq).spans)
    assert 'data-end-of="p1" data-status="ok"' in html and 'data-end-of="batch"' in html
    assert "trace-failed" not in html  # no new failure: the count is not resent
    assert 'class="sn ' not in html


def test_a_running_run_without_spans_has_a_slot_for_them(client, alice, workspace, workflow):
    from runs import actions
    from tests.pages.conftest import login

    actions.do_start_run(workspace=workspace, workflow=workflow, run_id="run_ls_slot")
    html = login(client, alice).get("/runs/run_ls_slot/").content.decode()
    assert '<div id="trace-slot" hidden></div>' in html and "workbench/trace.js" in html
    actions.do_cancel_tree(workspace=workspace, run_id="run_ls_slot", reason="done")
    html = client.get("/runs/run_ls_slot/").content.decode()
    assert "trace-slot" not in html and "workbench/trace.js" not in html
