"""`manage.py demo_data` shows the product: a 10k-event run with spans, artifacts edited as forms,
a rejected run, a fork, and a public demo that no one can change (a read-only snapshot)."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from runs.models import Event, Membership, Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    call_command("demo_data", stdout=open(tmp_path / "out.txt", "w"))
    return Run.objects.filter(workspace__slug="demo")


def test_a_large_run_with_spans_over_two_days(demo, client, django_user_model):
    batch = demo.get(run_id="run_demo_nightly_batch")
    assert batch.event_count >= 10_000 and batch.status == "completed"
    spans = Event.objects.filter(run=batch, type="span_started").count()
    assert spans > 2000  # a root span per step, a child span per posting
    client.force_login(django_user_model.objects.get(username="admin"))
    html = client.get("/runs/run_demo_nightly_batch/ledger/").content.decode()
    assert html.count('<th scope="row">20') == 2  # the batch ran past midnight: two days in the table
    page = client.get("/runs/run_demo_nightly_batch/", {"q": "rate limited"}).content.decode()
    assert "429 <mark>rate limited</mark> on posting #250" in page  # the match is highlighted


def test_rejected_run_fork_and_form_editable_artifacts(demo, client, django_user_model):
    rejected = [r for r in demo if r.rejected_gates]
    assert rejected, "a rejected run"
    forked = Event.objects.filter(run__in=demo, type="run_forked").values_list("body", flat=True)
    assert any(rejected[0].run_id in body for body in forked), "a fork of the rejected run (the fork action)"
    client.force_login(django_user_model.objects.get(username="admin"))
    for key in ("profile", "postings", "scores"):  # an object, and lists of objects: all forms
        html = client.get("/runs/run_demo_jobsearch/artifacts/", {"key": key}).content.decode()
        assert 'name="editor" value="form"' in html, key


def test_public_demo_is_a_snapshot_nobody_can_change(demo, client, django_user_model):
    from runs import actions
    from runs.engine import commands as c

    public = Run.objects.get(workspace__slug="public-demo", run_id="run_demo_jobsearch")
    assert public.pending_gates == 1
    assert not Membership.objects.filter(workspace=public.workspace).exists()
    # the signed-in demo owner approves the gate of the original ...
    admin = django_user_model.objects.get(username="admin")
    public_seq = public.last_seq
    actions.do_command(
        workspace=demo.first().workspace,
        run_id="run_demo_jobsearch",
        command=c.ResolveGate(step_id="score", gate="PAUSE_AFTER", decision="approved"),
        actor="user:admin",
    )
    original = demo.get(run_id="run_demo_jobsearch")
    assert Event.objects.filter(run=original, type="human_gate_resolved", step_id="score").exists()
    # ... and every visitor still sees the public demo's gate pending, with no way to resolve it
    public.refresh_from_db()
    assert public.pending_gates == 1
    assert "Public demo" in client.get("/runs/demo").content.decode()
    assert client.post("/runs/demo/gates/resolve/", {"decision": "approved"}).status_code == 302  # sign in
    client.force_login(admin)
    assert client.post("/runs/demo/gates/resolve/", {"decision": "approved"}).status_code == 404
    # ... and no action changes the snapshot, whoever asks (an operator's token included)
    with pytest.raises(actions.ActionError) as refused:
        actions.do_command(
            workspace=public.workspace,
            run_id=public.run_id,
            command=c.ResolveGate(step_id="score", gate="PAUSE_AFTER", decision="approved"),
            actor="user:admin",
        )
    assert refused.value.code == "READ_ONLY"
    from accounts.tokens import create_token

    token = create_token(workspace=public.workspace, name="operator", scopes=["read", "write", "review"])
    answer = client.post(
        "/api/runs/run_demo_jobsearch/gates/resolve",
        {"stepId": "score", "gate": "PAUSE_AFTER", "decision": "approved"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token.secret}",
    )
    assert answer.status_code == 409 and answer.json()["code"] == "READ_ONLY"
    public.refresh_from_db()
    assert public.pending_gates == 1 and public.last_seq == public_seq
    assert not Event.objects.filter(run=public, type="human_gate_resolved", step_id="score").exists()


def test_demo_data_is_idempotent(demo, settings, tmp_path):
    before = Run.objects.count(), Event.objects.count()
    call_command("demo_data", stdout=open(tmp_path / "again.txt", "w"))
    assert (Run.objects.count(), Event.objects.count()) == before


def test_job_search_runs_have_distinct_titles_readable_ids_and_truthful_tags(demo):
    job_search = list(demo.filter(workflow_id="job-search"))
    titles = [r.title for r in job_search]
    assert len(job_search) == 5 and all(titles) and len(set(titles)) == 5, titles
    assert "Senior backend roles, Berlin, remote-friendly" in titles
    fork = demo.get(run_id="run_demo_jobsearch_retry")
    assert "fork" in fork.tags and fork.title.startswith("Staff Python roles, Amsterdam")
    for run in job_search:  # a "rejected" tag only on a run a reviewer rejected
        assert "rejected" not in run.tags or run.rejected_gates, (run.run_id, run.tags)
