"""Every way out honours the redaction policy the same way (issue 23, section 2).

The canary bundle (tests/protocol/canary.py: a unique canary in every free-text field of every
event type, the run metadata, titles, annotations, artifact data and rule sets) is imported, then
read back through each way out: the REST export, the page export, the MCP export (tool and
resource share one operation), the CLI, the OTLP export (command and continuous stream) and the
transcript (API route, CLI and the live file). With ``user`` a canary may appear only where the
reference's profile keeps it; with ``mask`` and ``drop`` none appears. A run that carries a
policy (an imported redacted bundle) leaves redacted by it without being asked.
"""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from accounts.principals import principal_for_token
from accounts.tokens import authenticate_token
from runs import actions
from runs.actions.forks import do_fork_with_history
from runs.actions.notify import register_listener, unregister_listener
from runs.engine import commands as cmd
from runs.mcp import operations as mcp_ops
from runs.protocol.bundle import check_bundle
from runs.protocol.canonical import canonical_bytes
from runs.protocol.integrity import seal_bundle
from runs.protocol.redaction import MASK, METADATA_KEY, POLICIES, redaction_of
from runs.selectors.bundles import export_bundle_bytes
from runs.selectors.runs import get_run, iter_event_bodies
from runs.telemetry.otel_stream import ContinuousExporter
from runs.telemetry.transcript_log import sync_run, transcript_path
from tests.pages.conftest import login
from tests.protocol import canary
from tests.telemetry.test_otel_export import collector  # noqa: F401 (fixture)


def expected(policy: str) -> set[str]:
    return canary.kept_by_user() if policy == "user" else set()


def _why(got: set[str], policy: str) -> list[str]:
    return sorted(canary.CANARIES[c] for c in got ^ expected(policy))


@pytest.fixture
def full_run(workspace) -> str:
    run = actions.do_import_bundle(workspace=workspace, data=canonical_bytes(canary.build()), actor="test")
    return run.run_id


def _redacted_copy(workspace, run_id: str, policy: str) -> str:
    """The run imported back from its redacted bundle: a run that carries ``policy``."""
    data = export_bundle_bytes(get_run(workspace, run_id), redact=policy)
    return actions.do_import_bundle(workspace=workspace, data=data, actor="test", as_new_id=True).run_id


def _legacy_copy(workspace) -> str:
    """A run that names ``mask`` but still holds the text (a bundle redacted by an older, narrower
    policy, or made by hand): what leaves it must be redacted all the same."""
    bundle = canary.build()
    bundle["run"]["metadata"] = {METADATA_KEY: {"policy": "mask", "version": 1}}
    data = canonical_bytes(seal_bundle({k: v for k, v in bundle.items() if k != "integrity"}))
    return actions.do_import_bundle(workspace=workspace, data=data, actor="test", as_new_id=True).run_id


def _otlp_bytes(collector) -> bytes:  # noqa: F811
    return b"".join(request.SerializeToString() for _, _, request in collector.requests)


# ---------------------------------------------------------------- bundles


@pytest.mark.parametrize("policy", POLICIES)
def test_every_bundle_way_out_keeps_exactly_what_the_policy_keeps(
    api, client, alice, workspace, full_token, full_run, tmp_path, policy
):
    login(client, alice)
    principal = principal_for_token(authenticate_token(full_token))
    ways = {
        "rest": api.get(f"/api/runs/{full_run}/bundle", redact=policy).content,
        "page": client.get(f"/runs/{full_run}/export/", {"redact": policy}).content,
        "mcp": mcp_ops.export_bundle(principal, run_id=full_run, redact=policy)[0],
    }
    out = tmp_path / "bundle.json"
    call_command("bundle", "export", full_run, "--redact", policy, "-o", str(out), stdout=io.StringIO())
    ways["cli"] = out.read_bytes()
    hashes = set()
    for way, data in ways.items():
        got = canary.found(data)
        assert got == expected(policy), (way, _why(got, policy))
        result = check_bundle(data)
        assert result.ok and result.integrity == "valid", (way, result.message)
        assert redaction_of(result.bundle)["policy"] == policy, way
        hashes.add(result.bundle["integrity"]["sha256"])
    assert len(hashes) == 1  # the same bundle whichever way it left
    # a redacted bundle is a bundle: it imports, and carries its policy from then on
    again = actions.do_import_bundle(workspace=workspace, data=ways["rest"], as_new_id=True)
    assert redaction_of({"run": again.run_doc})["policy"] == policy
    page = client.get(f"/runs/{again.run_id}/")  # and reads as a run: no title, structure intact
    assert page.status_code == 200 and canary.found(page.content) <= expected(policy)


def test_the_full_export_still_holds_every_canary(api, full_run):
    """The test can fail: without a policy the canaries are all there."""
    assert canary.found(api.get(f"/api/runs/{full_run}/bundle").content) == set(canary.CANARIES)


def test_unknown_policies_are_refused_with_a_code_everywhere(api, client, alice, full_token, full_run):
    login(client, alice)
    page = client.get(f"/runs/{full_run}/export/", {"redact": "everything"})
    assert page.status_code == 400 and b"INVALID_INPUT" in page.content
    assert api.get(f"/api/runs/{full_run}/transcript.jsonl", redact="nope").json()["code"] == "INVALID_INPUT"
    principal = principal_for_token(authenticate_token(full_token))
    with pytest.raises(mcp_ops.Refused) as info:
        mcp_ops.export_bundle(principal, run_id=full_run, redact="nope")
    assert info.value.code == "INVALID_INPUT"
    follow = api.get(f"/api/runs/{full_run}/transcript.jsonl", redact="mask", follow="true")
    assert follow.status_code == 400 and follow.json()["code"] == "INVALID_INPUT"


def test_the_page_explains_the_policies_next_to_the_choice(client, alice, full_run):
    login(client, alice)
    html = client.get(f"/runs/{full_run}/").content.decode()
    choice = html[html.index('id="export-redact"') : html.index('id="export-redact-help"') + 1200]
    assert 'value="mask"' in choice and 'value="drop"' in choice and 'value="user"' in choice
    assert "reference runtime&#x27;s profile" in choice or "reference runtime's profile" in choice
    assert "keeps titles, summaries, annotations, notes, error messages and artifact data" in choice


# ---------------------------------------------------------------- transcripts


@pytest.mark.parametrize("policy", POLICIES)
def test_the_transcript_of_a_redacted_run_holds_only_what_its_policy_keeps(
    api, workspace, full_run, tmp_path, policy
):
    copy = _redacted_copy(workspace, full_run, policy)
    ways = {
        "api": b"".join(api.get(f"/api/runs/{copy}/transcript.jsonl").streaming_content),
        "api?redact": b"".join(
            api.get(f"/api/runs/{full_run}/transcript.jsonl", redact=policy).streaming_content
        ),
    }
    out = tmp_path / "t.jsonl"
    call_command("transcript", full_run, "--redact", policy, "-o", str(out))
    ways["cli --redact"] = out.read_bytes()
    run = get_run(workspace, copy)
    sync_run(run)
    ways["live file"] = transcript_path(run).read_bytes()
    for way, data in ways.items():
        got = canary.found(data)
        assert got <= expected(policy), (way, _why(got - expected(policy), policy))
    full = b"".join(api.get(f"/api/runs/{full_run}/transcript.jsonl").streaming_content)
    assert canary.found(full) - canary.kept_by_user()  # payload canaries: the test can fail


def test_a_run_that_names_a_policy_is_redacted_on_the_way_out_even_if_it_holds_text(
    api,
    workspace,
    collector,  # noqa: F811
):
    legacy = _legacy_copy(workspace)
    run = get_run(workspace, legacy)
    assert canary.found(b"".join(e.encode() for e in map(str, iter_event_bodies(run))))  # it holds text
    transcript = b"".join(api.get(f"/api/runs/{legacy}/transcript.jsonl").streaming_content)
    assert canary.found(transcript) == set()
    sync_run(run)
    assert canary.found(transcript_path(run).read_bytes()) == set()
    call_command("otel_export", legacy, "--endpoint", collector.url, stdout=io.StringIO())
    assert collector.requests and canary.found(_otlp_bytes(collector)) == set()


def test_what_is_appended_to_a_fork_of_a_masked_run_is_masked_too(api, workspace, full_run):
    copy = _redacted_copy(workspace, full_run, "mask")
    fork = do_fork_with_history(
        workspace=workspace, source_run_id=copy, mode="branch", from_seq=6, actor="test", executable=False
    ).run.run_id  # a running run that carries the policy (a finished one takes no commands)
    actions.do_command(
        workspace=workspace, run_id=fork, command=cmd.Annotate(text="cnry999x", tags=["late"]), actor="test"
    )
    last = list(iter_event_bodies(get_run(workspace, fork)))[-1]
    assert (last["type"], last["text"], last["tags"]) == ("annotation", MASK, ["late"])
    assert b"cnry999x" not in b"".join(api.get(f"/api/runs/{fork}/transcript.jsonl").streaming_content)


# ---------------------------------------------------------------- OTLP


@pytest.mark.parametrize("policy", POLICIES)
def test_the_otlp_export_of_a_redacted_run_holds_only_what_its_policy_keeps(
    workspace,
    full_run,
    collector,  # noqa: F811 (the fixture)
    policy,
):
    copy = _redacted_copy(workspace, full_run, policy)
    call_command("otel_export", copy, "--endpoint", collector.url, stdout=io.StringIO())
    carried = _otlp_bytes(collector)
    collector.requests.clear()
    call_command(
        "otel_export", full_run, "--redact", policy, "--endpoint", collector.url, stdout=io.StringIO()
    )
    asked = _otlp_bytes(collector)
    for way, data in (("run's own policy", carried), ("--redact", asked)):
        got = canary.found(data)
        assert data and got <= expected(policy), (way, _why(got - expected(policy), policy))
    if policy != "user":  # the numbers a reviewer totals still arrive
        assert b"gen_ai.usage.input_tokens" in asked and b"gpt-canary" in asked
    collector.requests.clear()
    call_command("otel_export", full_run, "--endpoint", collector.url, stdout=io.StringIO())
    assert canary.found(_otlp_bytes(collector)) - canary.kept_by_user() == set()  # payloads never in spans
    assert canary.found(_otlp_bytes(collector))  # ...but the full run's text is: the test can fail


@pytest.mark.django_db(transaction=True)
def test_the_continuous_otlp_stream_sends_a_redacted_run_redacted(workspace, collector):  # noqa: F811
    full_run = actions.do_import_bundle(workspace=workspace, data=canonical_bytes(canary.build())).run_id
    exporter = ContinuousExporter(
        endpoint=collector.url, schedule_delay_millis=50, timeout=5, egress_allow=("127.0.0.0/8",)
    )
    register_listener(exporter.on_change)
    try:
        copy = _redacted_copy(workspace, full_run, "mask")  # imported after the stream started: sent
        legacy = _legacy_copy(workspace)
        assert exporter.flush()
    finally:
        unregister_listener(exporter.on_change)
        exporter.shutdown()
    data = _otlp_bytes(collector)
    assert copy.encode() in data and legacy.encode() in data and full_run.encode() not in data
    assert canary.found(data) == set()


@pytest.fixture(autouse=True)
def _operator_allows_the_loopback_collector(settings):
    # The collector fake listens on loopback; outside the embedded profile (PostgreSQL runs) the
    # operator's own OTLP destination reaches loopback only with the allowance.
    settings.WORKBENCH_EGRESS_ALLOW = ["127.0.0.0/8", "::1/128"]
