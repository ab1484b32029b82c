""" "Open in playground" is honest: the recorded provider and model are restored when configured,
and the page says plainly what was substituted (and why) when they are not."""

from __future__ import annotations

import json

import pytest

from playground import compose as c
from playground import restore
from playground.restore import Candidate

SONNET = Candidate(pk=1, kind="anthropic", model_id="claude-sonnet-4-6", label="Sonnet")
HAIKU = Candidate(pk=2, kind="anthropic", model_id="claude-haiku-4-5", label="Haiku")
MINI = Candidate(pk=3, kind="openai", model_id="gpt-4.1-mini", label="Mini")


# --- the pure choice ------------------------------------------------------------------------


def test_the_recorded_model_wins_over_the_default():
    chosen, status = restore.choose_model(
        kind="openai", model_id="gpt-4.1-mini", candidates=[SONNET, MINI], default_pk=1
    )
    assert (chosen, status) == (MINI, restore.EXACT)


def test_same_provider_is_preferred_to_the_default_of_another_provider():
    chosen, status = restore.choose_model(
        kind="anthropic", model_id="claude-opus-4", candidates=[MINI, HAIKU, SONNET], default_pk=3
    )
    assert (chosen, status) == (HAIKU, restore.OTHER_MODEL)
    chosen, _ = restore.choose_model(
        kind="anthropic", model_id="claude-opus-4", candidates=[MINI, HAIKU, SONNET], default_pk=1
    )
    assert chosen == SONNET  # the default, when it is of the recorded provider


def test_another_provider_only_when_the_recorded_one_has_no_model():
    chosen, status = restore.choose_model(
        kind="openai", model_id="gpt-4.1-mini", candidates=[SONNET, HAIKU], default_pk=2
    )
    assert (chosen, status) == (HAIKU, restore.OTHER_PROVIDER)
    assert restore.choose_model(kind="openai", model_id="x", candidates=[], default_pk=None) == (
        None,
        restore.NO_MODEL,
    )


def test_exact_only_when_the_recomposed_request_equals_the_recorded_one():
    recorded = {"model": "gpt-4.1-mini", "messages": [], "seed": 7, "temperature": 0.2}
    same = restore.describe(
        kind="openai",
        model_id="gpt-4.1-mini",
        chosen=MINI,
        status=restore.EXACT,
        recorded=recorded,
        recomposed={"model": "gpt-4.1-mini", "messages": [], "temperature": 0.2, "seed": 7},
    )
    assert same.status == restore.EXACT and same.message.startswith("Restored exactly")
    partial = restore.describe(
        kind="openai",
        model_id="gpt-4.1-mini",
        chosen=MINI,
        status=restore.EXACT,
        recorded=recorded,
        recomposed={"model": "gpt-4.1-mini", "messages": [], "temperature": 0.2},
    )
    assert partial.status == restore.PARTIAL and partial.not_carried == ("seed",)
    assert "exactly" not in partial.message and "seed" in partial.message


def test_substitutions_never_claim_exactness():
    for chosen, status in (
        (HAIKU, restore.OTHER_MODEL),
        (SONNET, restore.OTHER_PROVIDER),
        (None, restore.NO_MODEL),
    ):
        r = restore.describe(kind="openai", model_id="gpt-4.1-mini", chosen=chosen, status=status)
        assert r.substituted and "exactly" not in r.message.lower()
        assert "gpt-4.1-mini (OpenAI)" in r.message


# --- the page -------------------------------------------------------------------------------

OPENAI_REQUEST = {
    "model": "gpt-4.1-mini",
    "messages": [
        {"role": "system", "content": "You normalise job postings."},
        {"role": "user", "content": "Normalise: <b>Staff</b> engineer"},
    ],
    "max_completion_tokens": 300,
    "temperature": 0.2,
}
ANTHROPIC_REQUEST = {
    "model": "claude-sonnet-4-6",
    "system": "You score job postings.",
    "messages": [{"role": "user", "content": "Score j1"}],
    "max_tokens": 512,
    "temperature": 0.5,
    "top_k": 20,
}


def _recorded_call(workspace, provider: str, request: dict) -> str:
    """A run whose trace holds one model call with its request payload (as a host records it)."""
    from runs.execution.host import Workbench
    from tests.conftest import LINEAR_WORKFLOW

    s = Workbench(workspace=workspace, actor="pipeline:test").start_run(workflow=LINEAR_WORKFLOW)
    s.log_model_io(
        direction="request", provider=provider, model=request["model"], correlation_id="c1", payload=request
    )
    return s.run_id


def _open(client, run_id: str, seq: int = 1) -> dict:
    html = client.get(f"/playground/?from_event={run_id}:{seq}").content.decode()
    marker = '<script id="pg-initial" type="application/json">'
    start = html.index(marker) + len(marker)
    return json.loads(html[start : html.index("</script>", start)])


def _substituted(
    client, user, workspace, fake_models, *, drop: tuple[str, str], provider: str, request: dict
):
    """Open a recorded ``provider`` call after removing ``drop`` (model, provider) from the
    workspace: (initial page state, the notice, the restored session)."""
    for name in drop:
        fake_models[name].delete()
    client.force_login(user)
    initial = _open(client, _recorded_call(workspace, provider, request))
    restored = initial["origin"]["restore"]
    assert restored["status"] == "other_provider" and restored["substituted"]
    notice = initial["origin"]["model_notice"]
    assert "exactly" not in notice.lower()
    return initial, notice, c.session_from_json(initial["session"])


@pytest.mark.django_db
def test_openai_call_opened_where_only_anthropic_is_configured(client, alice, workspace, fake_models):
    initial, notice, session = _substituted(
        client,
        alice,
        workspace,
        fake_models,
        drop=("local", "openai"),
        provider="openai",
        request=OPENAI_REQUEST,
    )
    assert initial["model"] == fake_models["sonnet"].pk
    assert "gpt-4.1-mini (OpenAI), which is not configured in this workspace" in notice
    assert "no OpenAI model here can send" in notice  # the catalogue's GPT-5 has no key
    assert "Fake Sonnet (claude-sonnet-4-6, Anthropic) is selected instead" in notice
    # system prompt, message and parameters are carried over
    assert session.system_prompt == "You normalise job postings."
    assert session.prompt == "Normalise: <b>Staff</b> engineer"
    assert session.advanced.temperature.enabled and session.advanced.temperature.value == 0.2
    assert session.advanced.max_tokens == 300


@pytest.mark.django_db
def test_anthropic_call_opened_where_only_openai_is_configured(client, alice, workspace, fake_models):
    initial, notice, session = _substituted(
        client,
        alice,
        workspace,
        fake_models,
        drop=("sonnet", "anthropic"),
        provider="anthropic",
        request=ANTHROPIC_REQUEST,
    )
    assert initial["model"] == fake_models["local"].pk
    # the global catalogue lists claude-sonnet-4-6, but without a key it cannot send
    assert "claude-sonnet-4-6 (Anthropic), which is listed here but cannot send" in notice
    assert "no Anthropic model here can send" in notice
    assert "Fake local llama (llama-local, OpenAI) is selected instead" in notice
    assert session.system_prompt == "You score job postings." and session.prompt == "Score j1"
    assert session.advanced.top_k.enabled and session.advanced.top_k.value == 20
    assert session.advanced.temperature.value == 0.5 and session.advanced.max_tokens == 512


@pytest.mark.django_db
def test_recorded_provider_and_model_restored_and_unsupported_fields_named(
    client, alice, workspace, fake_models
):
    fake_models["local"].model_id = "gpt-4.1-mini"
    fake_models["local"].max_tokens_param = "max_completion_tokens"  # as OpenAI's own models
    fake_models["local"].save()
    client.force_login(alice)
    initial = _open(client, _recorded_call(workspace, "openai", {**OPENAI_REQUEST, "seed": 7}))
    restored = initial["origin"]["restore"]
    assert initial["model"] == fake_models["local"].pk  # the recorded one, not the Anthropic default
    assert restored["status"] == "partial" and restored["not_carried"] == ["seed"]
    assert "exactly" not in restored["message"] and "seed" in initial["origin"]["model_notice"]


def test_a_substitute_that_cannot_send_says_so():
    broke = Candidate(pk=9, kind="openai", model_id="gpt-5", label="GPT-5", usable=False)
    chosen, status = restore.choose_model(
        kind="openai", model_id="gpt-4.1-mini", candidates=[broke], default_pk=None
    )
    r = restore.describe(kind="openai", model_id="gpt-4.1-mini", chosen=chosen, status=status)
    assert r.model_pk == 9 and r.message.endswith("GPT-5 cannot send until its provider has an API key.")
