"""Nothing raw (issue 52): an error a page shows reads as a sentence with its code as a small tag
beside it (runs.templatetags.workbench.error_words), never ``INVALID_DATE: ...`` as the message.
Each page here used to print the code as the message's prefix."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.template import Context, Template
from django.utils import timezone

from evals import actions as eval_actions
from evals.models import Experiment, ExperimentItem
from runs.models_imports import ImportJob
from runs.selectors.bundles import export_bundle_bytes
from tests.pages.conftest import login

pytestmark = pytest.mark.django_db


def tag(code: str) -> str:
    return f'<code class="error-code">{code}</code>'


def no_prefix(html: str, code: str) -> bool:
    """The code never stands before a colon as the start of the message."""
    return re.search(rf"{code}\s*:", html) is None


def test_dashboard_bad_dates_in_words(client, alice):
    login(client, alice)
    html = client.get("/dashboard/", {"from": "yesterday"}).content.decode()
    assert "must be a day as YYYY-MM-DD, not “yesterday”." in html
    assert tag("INVALID_DATE") in html and no_prefix(html, "INVALID_DATE")
    first = (timezone.now().date() - timedelta(days=4000)).isoformat()
    long = client.get("/dashboard/", {"from": first})
    html = long.content.decode()
    assert long.status_code == 400
    assert "A range holds at most 366 days; showing the last 366." in html
    assert tag("RANGE_TOO_LONG") in html and no_prefix(html, "RANGE_TOO_LONG")


def test_compare_refusal_in_words(client, alice):
    login(client, alice)
    response = client.get("/compare/", {"run": ["run_a"]})
    html = response.content.decode()
    assert response.status_code == 400
    assert "Select exactly two runs to compare (you selected 1)." in html
    assert tag("INVALID_INPUT") in html and no_prefix(html, "INVALID_INPUT")


def test_import_upload_over_the_limit_in_words(client, alice, settings):
    settings.WORKBENCH_MAX_BUNDLE_BYTES = 4096
    login(client, alice)
    big = SimpleUploadedFile("big.json", b"[" + b"1," * 5000 + b"1]", content_type="application/json")
    response = client.post("/import/", {"bundle": big})
    html = response.content.decode()
    assert response.status_code == 413
    assert "The request body exceeds the server&#x27;s limit of 4096 bytes for a bundle import" in html
    assert tag("PAYLOAD_TOO_LARGE") in html and no_prefix(html, "PAYLOAD_TOO_LARGE")


def test_import_collision_in_words(client, alice, run):
    login(client, alice)
    check = client.post("/import/", {"bundle": SimpleUploadedFile("b.json", export_bundle_bytes(run))})
    collide = client.post("/import/", {"confirm": "1", "token": check.context["token"]})
    html = collide.content.decode()
    assert collide.status_code == 409
    assert tag("RUN_ID_COLLISION") in html and no_prefix(html, "RUN_ID_COLLISION")
    alert = re.search(r'<p class="field-error" role="alert">(.*?)</p>', html).group(1)
    assert alert[0].isupper() and alert.split(" <code")[0].endswith(".")


def test_failed_import_job_in_words(client, alice, workspace):
    ImportJob.objects.create(
        job_id="imp_failed",
        workspace=workspace,
        status="failed",
        file="x.json",
        size=100,
        error_code="INTEGRITY_MISMATCH",
        error_message="the hash chain breaks at event #3",
    )
    login(client, alice)
    html = client.get("/import/jobs/imp_failed/").content.decode()
    assert "The hash chain breaks at event #3." in html
    assert tag("INTEGRITY_MISMATCH") in html and no_prefix(html, "INTEGRITY_MISMATCH")


def test_failed_experiment_in_words(client, alice, workspace):
    dataset = eval_actions.do_create_dataset(workspace=workspace, name="Replies")
    experiment = Experiment.objects.create(
        public_id="exp_lost",
        workspace=workspace,
        dataset=dataset,
        as_of_revision=0,
        name="haiku",
        change={},
        evaluator={"kind": "exact"},
        status="failed",
        error="WORKER_LOST: the worker running the experiment stopped before it finished",
        created_at=timezone.now(),
    )
    ExperimentItem.objects.create(experiment=experiment, item_key="item-0", status="failed")
    login(client, alice)
    html = client.get("/evals/experiments/exp_lost/").content.decode()
    assert "The worker running the experiment stopped before it finished." in html
    assert tag("WORKER_LOST") in html and no_prefix(html, "WORKER_LOST")


@pytest.mark.parametrize(
    ("message", "code", "shown"),
    [
        ("the chain breaks", "INTEGRITY_MISMATCH", f"The chain breaks. {tag('INTEGRITY_MISMATCH')}"),
        ("", "NOT_FOUND", f"Nothing with that id. {tag('NOT_FOUND')}"),
        ("just words", "", "Just words."),
        ("<b>x</b>", "A_CODE", f"&lt;b&gt;x&lt;/b&gt;. {tag('A_CODE')}"),
    ],
)
def test_error_words_takes_a_code_kept_apart(message, code, shown):
    template = Template("{% load workbench %}{{ message|error_words:code }}")
    assert template.render(Context({"message": message, "code": code})) == shown
