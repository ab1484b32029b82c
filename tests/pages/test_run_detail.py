"""Run detail: header, graph, gate panel (decisions with who/when), timeline paging and filters, state diff."""

from __future__ import annotations

import re

import pytest

from tests.pages.conftest import login

pytestmark = pytest.mark.django_db


def _append_many(run, n, *, workspace):
    from runs import actions
    from runs.engine import commands as c

    cmds = []
    for i in range(n):
        if i % 10 == 0:
            cmds.append(
                c.LogModelIO(
                    direction="stream_chunk",
                    provider="p",
                    model="m",
                    correlation_id=f"s{i // 50}",
                    payload={"delta": f"t{i} "},
                )
            )
        elif i % 7 == 0:
            cmds.append(c.LogToolCall(name=f"tool-{i}", args={"i": i}, correlation_id=f"tc{i}"))
        else:
            cmds.append(c.Annotate(text=f"note number {i}"))
    actions.do_commands(workspace=workspace, run_id=run.run_id, commands=cmds, actor="user:alice")
    run.refresh_from_db()
    return run


def seqs(html: str) -> list[int]:
    return [int(s) for s in re.findall(r'<li class="ev [^"]*" id="seq-(\d+)"', html)]


def test_detail_header_graph_and_partials(client, alice, make_run, workspace):
    from runs import actions

    parent = make_run("run_parent")
    child = actions.do_fork_from_state(
        workspace=workspace, parent_run_id=parent.run_id, from_seq=3, actor="user:alice"
    )
    login(client, alice)
    html = client.get(f"/runs/{parent.run_id}/").content.decode()
    assert 'id="live" data-run-id="run_parent"' in html
    assert (
        'id="run-status"' in html
        and 'id="graph"' in html
        and 'id="gate-panel"' in html
        and 'id="timeline-list"' in html
    )
    assert "<svg" in html and 'data-step="review"' in html and "gate-pending" in html
    assert f'href="/runs/{child.run_id}/"' in html  # lineage: children
    assert "userId: u-1" in html and "nightly" in html and "source" in html
    assert f'href="/runs/{parent.run_id}/export/"' in html
    from runs.engine import commands as c

    actions.do_command(
        workspace=workspace, run_id=parent.run_id, command=c.Annotate(text="checked by hand", tags=["qa"])
    )
    html = client.get(f"/runs/{parent.run_id}/").content.decode()
    assert "checked by hand" in html and '<span class="tag">qa</span>' in html
    child_html = client.get(f"/runs/{child.run_id}/").content.decode()
    assert 'href="/runs/run_parent/"' in child_html  # lineage: parents


def test_export_downloads_a_verifiable_bundle(client, alice, run):
    from runs.protocol.bundle import check_bundle

    login(client, alice)
    response = client.get(f"/runs/{run.run_id}/export/")
    assert response["Content-Disposition"].startswith("attachment;")
    assert check_bundle(response.content).ok


def test_reviewer_approves_gate_and_history_shows_who(client, bob, run):
    login(client, bob)
    response = client.post(
        f"/runs/{run.run_id}/gates/resolve/",
        {"decision": "approved", "step_id": "review", "gate": "PAUSE_BEFORE", "note": "fine by me"},
        HTTP_HX_REQUEST="true",
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert 'hx-swap-oob="true"' in html and 'id="run-status"' in html and 'id="graph"' in html
    assert "by user:bob" in html and "fine by me" in html and "approved" in html
    from runs.models import Run
    from runs.selectors.runs import run_state

    state = run_state(Run.objects.get(run_id=run.run_id))
    assert state.gate_state["review"]["before"] == "approved"
    assert "review" in state.ready_steps()


def test_gate_errors_are_shown_not_raised(client, bob, run):
    login(client, bob)
    response = client.post(
        f"/runs/{run.run_id}/gates/resolve/",
        {"decision": "approved", "step_id": "nope", "gate": "PAUSE_BEFORE"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200 and "UNKNOWN_STEP" in response.content.decode()
    plain = client.post(
        f"/runs/{run.run_id}/gates/resolve/",
        {"decision": "maybe", "step_id": "review", "gate": "PAUSE_BEFORE"},
    )
    assert plain.status_code == 302


def test_reject_and_cancel(client, alice, run):
    login(client, alice)
    client.post(
        f"/runs/{run.run_id}/gates/resolve/",
        {"decision": "rejected", "step_id": "review", "gate": "PAUSE_BEFORE", "note": "no"},
    )
    client.post(f"/runs/{run.run_id}/cancel/", {"reason": "stop"})
    run.refresh_from_db()
    assert run.status == "cancelled"
    page = client.get(f"/runs/{run.run_id}/").content.decode()
    assert "Cancel run" not in page and "rejected" in page


def test_timeline_pages_by_seq_window(client, alice, run, workspace):
    run = _append_many(run, 300, workspace=workspace)
    login(client, alice)
    tail = seqs(client.get(f"/runs/{run.run_id}/").content.decode())
    assert max(tail) == run.last_seq and min(tail) > 1  # a running run opens at its tail
    first = client.get(f"/runs/{run.run_id}/", {"after": 0}).content.decode()
    shown = seqs(first)
    assert shown[0] == 1 and max(shown) <= 100
    nxt = client.get(f"/runs/{run.run_id}/timeline/?after=100", HTTP_HX_REQUEST="true").content.decode()
    page2 = seqs(nxt)
    assert min(page2) > 100 and max(page2) <= 200
    assert "after=200" in nxt and "before=101" in nxt
    last = client.get(
        f"/runs/{run.run_id}/timeline/?before={run.last_seq + 1}", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert max(seqs(last)) <= run.last_seq and run.last_seq in [
        int(s) for s in re.findall(r'id="seq-(\d+)"', last)
    ]
    deep = client.get(f"/runs/{run.run_id}/?at=250").content.decode()
    assert 'id="seq-250"' in deep
    # without htmx the fragment URL falls back to the full page at that window
    assert client.get(f"/runs/{run.run_id}/timeline/?after=100").status_code == 302


def test_timeline_filters(client, alice, run, workspace):
    run = _append_many(run, 120, workspace=workspace)
    login(client, alice)
    url = f"/runs/{run.run_id}/timeline/"
    tools = client.get(url, {"type": "tool_call"}, HTTP_HX_REQUEST="true").content.decode()
    assert tools.count('class="ev ev-tool_call"') == len(seqs(tools)) > 0
    step = client.get(url, {"step": "parse"}, HTTP_HX_REQUEST="true").content.decode()
    assert seqs(step) and "ev-annotation" not in step
    corr = client.get(url, {"corr": "call-1"}, HTTP_HX_REQUEST="true").content.decode()
    assert len(seqs(corr)) == 2
    text = client.get(url, {"q": "note number 78"}, HTTP_HX_REQUEST="true").content.decode()
    assert len(seqs(text)) == 1 and "note number 78" in text


def test_stream_chunks_collapse_into_one_row(client, alice, run, workspace):
    run = _append_many(run, 120, workspace=workspace)
    login(client, alice)
    html = client.get(
        f"/runs/{run.run_id}/timeline/", {"type": "model_io"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "stream p/m · 5 chunks" in html
    # the light row loads its text when opened: the detail of the first chunk, up to the last
    seq, upto = re.search(r'data-seq="(\d+)" data-upto="(\d+)"', html).groups()
    detail = client.get(
        f"/runs/{run.run_id}/events/{seq}/detail/?upto={upto}", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "t0 t10 t20 t30 t40" in detail and "5 chunks" in detail


def test_timeline_rows_are_light_and_load_their_detail(client, alice, run, workspace):
    from runs.models import Event

    run = _append_many(run, 120, workspace=workspace)
    login(client, alice)
    html = client.get(f"/runs/{run.run_id}/timeline/", HTTP_HX_REQUEST="true").content.decode()
    assert "json-tree" not in html and "Replay from here" not in html and "state-slot" not in html
    assert f'data-detail-base="/runs/{run.run_id}/events/"' in html
    seq = Event.objects.filter(run=run, type="model_io").values_list("seq", flat=True).first()
    detail = client.get(f"/runs/{run.run_id}/events/{seq}/detail/", HTTP_HX_REQUEST="true")
    text = detail.content.decode()
    assert detail.status_code == 200 and "<html" not in text
    assert "json-tree" in text and "state-slot" in text and "Copy link" in text
    assert f"/fork/?mode=replay&amp;seq={seq}" in text and "from_event=" in text
    # without htmx: the run page opened at that event (its detail rendered in place)
    back = client.get(f"/runs/{run.run_id}/events/{seq}/detail/")
    assert back.status_code == 302 and back["Location"].endswith(f"?at={seq}#seq-{seq}")
    page = client.get(back["Location"]).content.decode()
    assert "json-tree" in page and f"/fork/?mode=replay&amp;seq={seq}" in page
    missing = client.get(f"/runs/{run.run_id}/events/{run.last_seq + 5}/detail/", HTTP_HX_REQUEST="true")
    assert missing.status_code == 404


def test_timeline_view_state_goes_in_the_address_bar(client, alice, run, workspace):
    run = _append_many(run, 120, workspace=workspace)
    login(client, alice)
    response = client.get(
        f"/runs/{run.run_id}/timeline/",
        {"type": "annotation", "q": "note", "at": "50"},
        HTTP_HX_REQUEST="true",
    )
    pushed = response["HX-Push-Url"]
    assert pushed.startswith(f"/runs/{run.run_id}/?") and pushed.endswith("#timeline")
    assert "type=annotation" in pushed and "q=note" in pushed and "at=50" in pushed
    # the pushed URL restores the same view: filters filled in, the jumped-to event opened
    page = client.get(pushed.split("#")[0]).content.decode()
    assert 'value="note"' in page and '<option value="annotation" selected>' in page
    assert re.search(r'id="seq-50" data-seq="50"><details open', page)


def test_state_at_event_shows_side_by_side_diff(client, alice, run):
    from runs.models import Event

    seq = Event.objects.get(run=run, type="artifact_written").seq
    login(client, alice)
    html = client.get(f"/runs/{run.run_id}/events/{seq}/", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in html
    assert "/artifacts/notes" in html and "added" in html
    assert f"Before (#{seq - 1})" in html and f"After (#{seq})" in html
    full = client.get(f"/runs/{run.run_id}/events/{seq}/").content.decode()
    assert "<html" in full and "State after event" in full
    assert client.get(f"/runs/{run.run_id}/events/{run.last_seq + 1}/").status_code == 404


def test_runs_list_filters_search_and_pagination(client, alice, make_run):
    for i in range(3):
        make_run(f"run_list_{i}", tags=("nightly" if i else "weekly",))
    login(client, alice)
    html = client.get("/runs/").content.decode()
    assert all(f"run_list_{i}" in html for i in range(3))
    assert "run_list_0" in client.get("/runs/", {"tag": "weekly"}).content.decode()
    assert "run_list_0" not in client.get("/runs/", {"tag": "nightly"}).content.decode()
    assert "run_list_1" in client.get("/runs/", {"q": "list_1"}).content.decode()
    assert "run_list_1" not in client.get("/runs/", {"status": "completed"}).content.decode()
    assert "run_list_1" in client.get("/runs/", {"workflow": "wf-demo"}).content.decode()
    frag = client.get("/runs/", {"status": "running"}, HTTP_HX_REQUEST="true").content.decode()
    assert frag.lstrip().startswith('<div id="run-table"')
    import runs.pages.run_list as views

    old = views.RUNS_PER_PAGE
    views.RUNS_PER_PAGE = 2
    try:
        page1 = client.get("/runs/").content.decode()
        cursor = re.search(r"cursor=([^\"&]+)", page1).group(1)
        from urllib.parse import unquote

        page2 = client.get("/runs/", {"cursor": unquote(cursor)}).content.decode()
    finally:
        views.RUNS_PER_PAGE = old
    ids1 = set(re.findall(r'href="/runs/(run_list_\d)/"', page1))
    ids2 = set(re.findall(r'href="/runs/(run_list_\d)/"', page2))
    assert len(ids1) == 2 and len(ids2) == 1 and not ids1 & ids2


def test_review_inbox_lists_pending_gates_across_runs(client, bob, make_run):
    make_run("run_inbox_a")
    make_run("run_inbox_b")
    make_run("run_inbox_c", finish_parse=False)
    login(client, bob)
    html = client.get("/runs/inbox/").content.decode()
    assert "run_inbox_a" in html and "run_inbox_b" in html and "run_inbox_c" not in html
    assert "PAUSE_BEFORE" in html


def test_model_calls_open_in_playground(client, alice, run):
    from runs.models import Event

    login(client, alice)
    seqs = list(Event.objects.filter(run=run).values_list("seq", "type"))
    call_seqs = [seq for seq, etype in seqs if etype == "model_io"]
    links = [  # an opened row offers it (its detail, loaded on demand)
        link
        for seq, _t in seqs
        for link in re.findall(
            r'href="(/playground/\?from_event=[^"]+)"',
            client.get(f"/runs/{run.run_id}/events/{seq}/detail/", HTTP_HX_REQUEST="true").content.decode(),
        )
    ]
    assert links == [f"/playground/?from_event={run.run_id}:{seq}" for seq in call_seqs]
    assert client.get(links[-1].replace("&amp;", "&")).status_code == 200
    from runs.web.partials import event_detail_context

    public = event_detail_context(run, call_seqs[0], url_id="demo")  # as the public demo shows it
    assert public is not None and public["row"].links["playground"] == "" == public["row"].links["replay"]


def test_list_and_inbox_refresh_themselves_on_workspace_changes(client, bob, make_run):
    """Both pages follow the workspace socket (live.js) and re-fetch only their table fragment
    (live.js paces the refreshes: no htmx throttle, which dropped the changes of its second)."""
    make_run("run_live_list")
    login(client, bob)
    for url, fragment_id in (("/runs/", "run-table"), ("/runs/inbox/", "inbox-table")):
        page = client.get(url).content.decode()
        assert f'id="{fragment_id}" data-live-workspace' in page
        assert 'hx-trigger="live:runs-changed from:body"' in page and "throttle" not in page
        fragment = client.get(url, HTTP_HX_REQUEST="true").content.decode()
        assert fragment.lstrip().startswith("<div") and "run_live_list" in fragment
        assert "<html" not in fragment
