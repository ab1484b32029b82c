"""runs.fields: protocol strings in columns, NUL and length, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import connection
from hypothesis import given
from hypothesis import strategies as st

from runs import actions
from runs.engine import commands as cmd
from runs.fields import fit, from_column, to_column
from runs.models import ArtifactVersion, Event, Run

ESC = "\uffff"


@given(st.text(alphabet=st.sampled_from(["\x00", ESC, "0", "1", "#", "a", "é"]), max_size=30))
def test_spelling_round_trips_and_never_holds_nul(text):
    spelt = to_column(text)
    assert "\x00" not in spelt
    assert from_column(spelt) == text


def test_spelling_is_injective_where_it_could_clash():
    texts = ["\x00", ESC + "0", ESC, ESC + "1", "0", ESC + ESC + "0", "\x00" + "0"]
    assert len({to_column(t) for t in texts}) == len(texts)


def test_fit_keeps_long_values_apart():
    a, b = "k" * 400 + "a", "k" * 400 + "b"
    assert len(fit(a, 300)) == 300 and fit(a, 300) != fit(b, 300)
    assert fit("short", 300) == "short"


@pytest.mark.django_db
def test_long_and_nul_keys_are_stored_found_and_kept_apart(workspace, workflow):
    run = actions.do_start_run(workspace=workspace, workflow=workflow, run_id="fields", actor="t")
    step = workflow["steps"][0]["id"]
    keys = ["k" * 400 + "a", "k" * 400 + "b", "nul\x00key", "esc" + ESC + "0"]
    for key in keys:
        command = cmd.WriteArtifact(key=key, type_id="t\x00" * 150, data={"k": key})
        actions.do_command(workspace=workspace, run_id="fields", command=command, actor="t")
    stored = ArtifactVersion.objects.filter(run=run)
    assert stored.count() == len(keys)
    for key in keys:
        assert ArtifactVersion.objects.filter(run=run, key=key).count() == 1
    if connection.vendor == "postgresql":
        assert all(len(v.key) <= 300 and len(v.type_id) <= 200 for v in stored)
    else:
        assert sorted(v.key for v in stored) == sorted(keys)
    # a search for NUL answers (SQLite's LIKE stops its pattern at a NUL: there it finds more)
    assert ArtifactVersion.objects.filter(run=run, key__contains="\x00").count() >= 1
    if connection.vendor == "postgresql":
        assert ArtifactVersion.objects.filter(run=run, key__contains="\x00").count() == 1
    assert Run.objects.filter(run_id="fields\x00").count() == 0
    assert Event.objects.filter(run=run, step_id=step + "\x00").count() == 0
