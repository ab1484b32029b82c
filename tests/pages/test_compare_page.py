"""The compare page (/compare/): two runs side by side, reachable from a fork, the runs list and the
determinism report; escaping of what traces carry; outsiders and missing runs get the same 404."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs import actions
from runs.actions.forks import do_fork_with_history
from runs.engine import commands as c
from runs.models import Run
from runs.web.partials import compare_url
from tests.pages.conftest import ATTR, XSS, login
from tests.pages.test_hostile_ids import ODD_IDS


def _drive(
    ws, run_id, *, answer: str, notes: dict, decision: str = "approved", tokens: int = 40, amount=0.002
):
    """parse: a model call answering ``answer``, artifact ``notes``; then review's gate decided."""
    model = {"provider": "anthropic", "model": "claude-haiku", "step_id": "parse"}
    prompt = {"messages": [{"role": "user", "content": "Summarise the job ad"}]}
    usage = {"inputTokens": 100, "outputTokens": tokens}
    commands = [
        c.BeginStep(step_id="parse"),
        c.LogModelIO(direction="request", payload=prompt, **model),
        c.LogModelIO(
            direction="response",
            usage=usage,
            cost={"amount": amount, "currency": "usd"},
            duration_ms=300,
            payload={"content": [{"type": "text", "text": answer}]},
            **model,
        ),
        c.WriteArtifact(key="notes", type_id="json.notes", data=notes),
        c.CompleteStep(step_id="parse"),
        c.ResolveGate(step_id="review", gate="PAUSE_BEFORE", decision=decision),
    ]
    for command in commands:  # one by one, as a host appends them
        actions.do_command(workspace=ws, run_id=run_id, command=command, actor="user:alice")


def _start(ws, workflow, run_id):
    actions.do_start_run(workspace=ws, workflow=workflow, actor="user:alice", run_id=run_id)


@pytest.fixture
def pair(workspace, workflow):
    _start(workspace, workflow, "run_a")
    _drive(
        workspace,
        "run_a",
        answer="Senior engineer in Berlin, remote possible.",
        notes={"title": "first", "items": [1, 2]},
    )
    _start(workspace, workflow, "run_b")
    _drive(
        workspace,
        "run_b",
        answer="Senior engineer in Munich, remote possible.",
        notes={"title": "second", "items": [1, 2, 3]},
        decision="rejected",
        tokens=60,
        amount=0.003,
    )
    return Run.objects.get(run_id="run_a"), Run.objects.get(run_id="run_b")


def _url(a, b, **extra):
    query = "&".join(f"{k}={quote(v, safe='')}" for k, v in {"a": a, "b": b, **extra}.items())
    return f"/compare/?{query}"


@pytest.mark.django_db
def test_two_runs_side_by_side(client, alice, pair):
    login(client, alice)
    response = client.get(_url("run_a", "run_b"))
    assert response.status_code == 200
    page = response.content.decode()
    # the changed model output, diffed word by word
    assert "<del>Berlin, </del><ins>Munich, </ins>" in page
    # the artifact's data, path by path
    assert "/title</span> changed" in page and "/items/2</span> added" in page
    # gate decisions and statuses per step
    assert "PAUSE_BEFORE: approved" in page and "PAUSE_BEFORE: rejected" in page
    # a changed status says its change, from A's to B's (the run's, each step's)
    a_status, b_status = re.findall(r'<td><span class="badge badge-(\w+)">', page)[:2]
    expected = f"{a_status} → {b_status}" if a_status != b_status else "unchanged"
    assert f'<td class="delta">{expected}</td>' in page
    # deltas with signs and percentages (B - A, of A)
    assert "+20 (+50.0%)" in page  # output tokens 40 -> 60
    assert "+0.001 (+50.0%)" in page  # cost USD 0.002 -> 0.003
    assert '<div class="delta delta-up">tokens +20 (+14.3%)</div>' in page  # on the model call's row
    # the first divergence: the model response, linked to the page that holds it, and anchored there
    assert 'id="first-divergence"' in page
    first = re.search(r'<section id="divergence".*?href="([^"]+)"', page, re.S).group(1)
    assert first.endswith("#first-divergence") and "pos=" in first
    jumped = client.get(first.replace("&amp;", "&").split("#")[0]).content.decode()
    rows = re.findall(r'<tr class="(cmp-[^"]+)"', jumped)
    assert rows[:2] == ["cmp-prefix", "cmp-changed cmp-first"]  # what came before is collapsed
    assert "Identical history up to seq 2 " in jumped  # by default, the page starts there too
    assert "<del>Berlin, </del>" in jumped


@pytest.mark.django_db
def test_fork_shows_collapsed_history_and_links_back(client, alice, pair, workspace):
    run_a, _ = pair
    fork = do_fork_with_history(
        workspace=workspace, source_run_id="run_a", mode="branch", from_seq=4, executable=False
    )
    login(client, alice)
    detail = client.get(f"/runs/{fork.run.run_id}/").content.decode()
    link = re.search(r'href="([^"]+)" id="compare-with-source"', detail).group(1).replace("&amp;", "&")
    assert link == _url("run_a", fork.run.run_id)
    source = client.get("/runs/run_a/").content.decode()  # and from the source, beside each fork
    assert f'href="{link.replace("&", "&amp;")}" aria-label="Compare with {fork.run.run_id}"' in source
    page = client.get(link).content.decode()
    assert 'Identical history up to seq 3 <span class="muted">(seqs 1–3 copied into the fork)' in page
    assert "B is a branch of A from seq 4" in page
    assert ">fork marker<" in page  # run_forked: shown, not counted as a difference
    # the fork has not produced events of its own yet: A's tail shows as "only in A"
    assert "only in A" in page
    full = client.get(link + "&pos=0.0").content.decode()
    assert "Identical history" not in full and full.count(">same<") == 3


@pytest.mark.django_db
def test_runs_list_selects_two_runs_without_javascript(client, alice, pair):
    login(client, alice)
    listing = client.get("/runs/").content.decode()
    assert '<form id="compare-form" method="get" action="/compare/"' in listing
    assert 'name="run" value="run_b" form="compare-form"' in listing
    # a live refresh of the table sends the ticked runs along: they stay ticked, and only they
    refreshed = client.get("/runs/", {"run": "run_a", "q": "run"}, HTTP_HX_REQUEST="true").content.decode()
    assert 'value="run_a" form="compare-form" id="cmp-2" checked' in refreshed
    assert 'value="run_b" form="compare-form" id="cmp-1" aria-label' in refreshed
    assert 'hx-get="/runs/?q=run" hx-include="#compare-form"' in refreshed
    response = client.get("/compare/", {"run": ["run_b", "run_a"]})  # newest first, as the list shows them
    assert response.status_code == 302 and response["Location"] == _url("run_a", "run_b")
    one = client.get("/compare/", {"run": ["run_a"]})
    assert one.status_code == 400 and b"Select exactly two runs" in one.content
    three = client.get("/compare/", {"run": ["run_a", "run_b", "run_a"]})
    assert three.status_code == 400


@pytest.mark.django_db
def test_bad_input_is_a_clear_400(client, alice, pair):
    login(client, alice)
    assert client.get("/compare/").status_code == 200  # the form
    assert client.get("/compare/?a=run_a").status_code == 400
    same = client.get(_url("run_a", "run_a"))
    assert same.status_code == 400 and b"same run" in same.content
    for pos in ("x", "1", "1.2.3", "-1.0", "99999999999.0", "1." + "9" * 30):
        response = client.get(_url("run_a", "run_b", pos=pos))
        assert response.status_code == 400 and b"INVALID_INPUT" in response.content, pos
    beyond = client.get(_url("run_a", "run_b", pos="500.500"))
    assert beyond.status_code == 200 and b"No events after A #500" in beyond.content


def _body(response) -> str:
    """The page without its per-request secrets (CSRF token, CSP nonce)."""
    return re.sub(
        r'(csrfmiddlewaretoken" value="|X-CSRFToken": "|nonce=")[^"]+', r"\1", response.content.decode()
    )


@pytest.mark.django_db
def test_viewers_may_compare(client, vera, pair):
    login(client, vera)
    assert client.get(_url("run_a", "run_b")).status_code == 200
    assert client.get("/compare/").status_code == 200


@pytest.mark.django_db
def test_outsiders_get_the_same_404_as_for_missing_runs(
    client, charlie, alice, pair, other_workspace, workflow
):
    _start(other_workspace, workflow, "run_theirs")
    login(client, charlie)
    foreign = client.get(_url("run_a", "run_b"))
    mixed = client.get(_url("run_theirs", "run_b"))
    missing = client.get(_url("run_theirs", "run_nope"))
    assert foreign.status_code == mixed.status_code == missing.status_code == 404
    assert _body(foreign) == _body(mixed) == _body(missing)
    assert b"run_b" not in foreign.content
    listed = client.get("/compare/", {"run": ["run_a", "run_theirs"]})
    assert listed.status_code == 404
    client.logout()
    login(client, alice)
    assert client.get(_url("run_a", "run_theirs")).status_code == 404
    assert client.get(_url("run_theirs", "run_a")).status_code == 404


@pytest.mark.django_db
def test_everything_a_trace_carries_is_escaped(client, alice, workspace, workflow):
    for run_id, answer in ((XSS, f"ok {XSS} one"), (f"{ATTR}/&#", f"ok {ATTR} two <b>")):
        _start(workspace, workflow, run_id)
        _drive(workspace, run_id, answer=answer, notes={XSS: ATTR, "html": answer})
        actions.do_command(
            workspace=workspace, run_id=run_id, actor="x", command=c.Annotate(text=answer, tags=[XSS])
        )
    login(client, alice)
    response = client.get(_url(XSS, f"{ATTR}/&#"))
    assert response.status_code == 200
    page = response.content.decode()
    assert "<script>alert" not in page and 'onmouseover="alert' not in page and "<b>" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert "<del>" in page and "<ins>" in page  # the diff's own markup is all that is not escaped


@pytest.mark.django_db
def test_determinism_report_links_to_the_divergence(client, alice, pair, workspace):
    fork = do_fork_with_history(
        workspace=workspace, source_run_id="run_a", mode="replay", from_seq=3, executable=False
    )
    rid = fork.run.run_id
    for command in (
        c.LogModelIO(
            direction="response",
            provider="anthropic",
            model="claude-haiku",
            step_id="parse",
            usage={"inputTokens": 100, "outputTokens": 40},
            cost={"amount": 0.002, "currency": "usd"},
            payload={"content": [{"type": "text", "text": "Another answer entirely."}]},
        ),
    ):
        actions.do_command(workspace=workspace, run_id=rid, command=command, actor="host")
    login(client, alice)
    report = client.get(f"/runs/{rid}/determinism/").content.decode()
    links = [h.replace("&amp;", "&") for h in re.findall(r'href="(/compare/[^"]+)"', report)]
    assert _url("run_a", rid) in links
    jump = next(h for h in links if "at=divergence" in h)
    page = client.get(jump.split("#")[0]).content.decode()
    assert 'id="first-divergence"' in page
    assert "<del>Senior engineer in Berlin, remote possible.</del><ins>Another answer entirely.</ins>" in page


@pytest.mark.django_db
def test_pages_of_aligned_rows_cover_both_traces_once(client, alice, workspace, workflow, settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}
    for run_id, skip in (("run_long_a", 120), ("run_long_b", None)):
        _start(workspace, workflow, run_id)
        notes = [c.Annotate(text=f"note {i}") for i in range(250) if i != skip]
        actions.do_commands(workspace=workspace, run_id=run_id, commands=notes, actor="x")
    login(client, alice)
    url, seen_a, seen_b, kinds = _url("run_long_a", "run_long_b", pos="0.0"), [], [], []
    while url:
        response = client.get(url, HTTP_HX_REQUEST="true")
        page = response.content.decode()
        assert page.lstrip().startswith('<div id="aligned">')  # htmx gets the partial alone
        seen_a += [int(s) for s in re.findall(r"/runs/run_long_a/\?at=(\d+)", page)]
        seen_b += [int(s) for s in re.findall(r"/runs/run_long_b/\?at=(\d+)", page)]
        kinds += re.findall(r'<tr class="cmp-(\w+)[" ]', page)
        nxt = re.search(r'hx-get="([^"]+)"', page)
        url = nxt.group(1).replace("&amp;", "&") if nxt else None
    assert seen_a == list(range(1, 250)) and seen_b == list(range(1, 251))
    # the note A skipped is B's one extra row; every other note lines up with its equal
    assert kinds.count("only_b") == 1 and "changed" not in kinds and "only_a" not in kinds


@pytest.mark.django_db
@pytest.mark.parametrize("odd", ODD_IDS)
def test_any_run_id_travels_in_the_shareable_url(client, alice, pair, odd, workspace, workflow):
    _start(workspace, workflow, odd)
    login(client, alice)
    url = compare_url(odd, "run_a")
    response = client.get(url)
    assert response.status_code == 200 and response.context["a"].run_id == odd
    assert reverse("runs:detail", args=[odd]) in response.content.decode()
    listed = client.get("/compare/", {"run": [odd, "run_a"]})
    assert listed.status_code == 302 and listed["Location"] in (url, compare_url("run_a", odd))


@pytest.mark.django_db
def test_queries_do_not_grow_with_the_traces(client, alice, workspace, workflow, settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}
    counts = []
    for size in (5, 400):
        for side in ("a", "b"):
            run_id = f"run_{size}_{side}"
            _start(workspace, workflow, run_id)
            _drive(workspace, run_id, answer=f"answer {side}", notes={"n": size})
            notes = [c.Annotate(text=f"note {i}", step_id="parse") for i in range(size)]
            actions.do_commands(workspace=workspace, run_id=run_id, commands=notes, actor="x")
        login(client, alice)
        client.get("/runs/")
        with CaptureQueriesContext(connection) as queries:
            assert client.get(_url(f"run_{size}_a", f"run_{size}_b")).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1], counts


@pytest.mark.django_db
def test_totals_of_big_runs_come_apart_from_the_page(client, alice, pair, monkeypatch, settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}
    monkeypatch.setattr("runs.selectors.compare.SUMMARY_INLINE_EVENTS", 5)  # the pair has 12 events
    login(client, alice)
    page = client.get(_url("run_a", "run_b")).content.decode()
    assert 'id="first-divergence"' in page and 'id="totals-h"' not in page
    lazy = re.search(r'hx-get="([^"]+)" hx-trigger="load"', page).group(1).replace("&amp;", "&")
    assert lazy == _url("run_a", "run_b", part="summary")
    part = client.get(lazy, HTTP_HX_REQUEST="true").content.decode()
    assert part.lstrip().startswith('<div id="summary">') and "+20 (+50.0%)" in part
    assert "PAUSE_BEFORE: rejected" in part and "/items/2</span> added" in part
    no_js = re.search(r'<a href="([^"]+)">Show them</a>', page).group(1).replace("&amp;", "&")
    full = client.get(no_js).content.decode()
    assert 'id="totals-h"' in full and 'id="first-divergence"' in full


@pytest.mark.django_db
def test_patched_artifacts_are_diffed_as_the_versions_they_made(client, alice, pair, workspace):
    for run_id, value in (("run_a", "kept"), ("run_b", "changed")):
        patch = [
            {"op": "add", "path": "/status", "value": value},
            {"op": "replace", "path": "/title", "value": "t"},
        ]
        actions.do_command(
            workspace=workspace,
            run_id=run_id,
            actor="x",
            command=c.PatchArtifact(key="notes", from_version=1, patch=patch),
        )
    login(client, alice)
    page = client.get(_url("run_a", "run_b", pos="6.6")).content.decode()
    assert "Artifact data, notes v2 → v2" in page
    assert "/status</span> changed: &quot;kept&quot; → &quot;changed&quot;" in page
    assert "/items/2</span> added: 3" in page  # what v1 already differed in shows in v2 as well


@pytest.mark.django_db
def test_a_fork_from_state_is_aligned_from_its_marker(client, alice, pair, workspace):
    """A fork from state carries A's artifacts in before its run_forked marker: that is copied history
    (collapsed, never a divergence); B's own events are aligned with A's after the fork point."""
    actions.do_fork_from_state(workspace=workspace, parent_run_id="run_a", new_run_id="run_state_fork")
    actions.do_command(
        workspace=workspace,
        run_id="run_state_fork",
        command=c.Annotate(text="the fork goes its own way", step_id="parse"),
        actor="user:alice",
    )
    fork = Run.unscoped.get(run_id="run_state_fork")
    marker = [e.seq for e in fork.events.all() if e.type == "run_forked"][0]
    assert marker > 1  # the artifact it carried in comes first
    run_a = Run.unscoped.get(run_id="run_a")
    login(client, alice)
    page = client.get(_url("run_a", "run_state_fork")).content.decode()
    assert f"B is a fork of A from seq {run_a.last_seq + 1}" in page
    copied = re.search(r'<tr class="cmp-copied">.*?</tr>', page, re.S).group(0)
    assert "<details><summary>Copied history: " in copied and "B #1</a>" in copied
    divergence = re.search(r'<section id="divergence".*?</section>', page, re.S).group(0)
    assert f"B #{marker + 1}<" in divergence and "B #1<" not in divergence
    assert "only B has this event" in divergence and "the fork goes its own way" in divergence
    rows = re.findall(r'<tr class="(cmp-[^"]+)"', page)
    assert rows[:3] == ["cmp-copied", "cmp-marker", "cmp-only_b cmp-first"]
    # asking for the page from seq 0 never aligns the carried history with A's events
    whole = client.get(_url("run_a", "run_state_fork", pos="0.0")).content.decode()
    assert ">changed<" not in whole and "B #1</a>" in whole


@pytest.mark.django_db
def test_totals_leave_no_empty_cell(client, alice, pair, workspace, workflow):
    """A run whose model call nobody priced, still running: its cost and wall time say why they are
    missing ("—" with the reason), never an empty cell; a delta that cannot be taken reads "—"."""
    _start(workspace, workflow, "run_c")
    model = {"provider": "anthropic", "model": "claude-haiku", "step_id": "parse"}
    for command in (
        c.BeginStep(step_id="parse"),
        c.LogModelIO(direction="response", usage={"inputTokens": 10, "outputTokens": 5}, **model),
    ):
        actions.do_command(workspace=workspace, run_id="run_c", command=command, actor="user:alice")
    login(client, alice)
    page = client.get(_url("run_a", "run_c")).content.decode()
    totals = page[page.index('class="cmp-summary cmp-totals"') :]
    totals = totals[: totals.index("</table>")]
    cells = re.findall(r'<td class="num[^"]*">([^<]*)</td>', totals)
    assert cells and all(cell.strip() for cell in cells), cells
    assert "— (its model calls are not priced)" in totals
    if "Wall time" in totals:
        assert "— (still running)" in totals
