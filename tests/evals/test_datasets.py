"""Datasets: items from decided gates of the demo data, append-only revisions and ``asOf``."""

from __future__ import annotations

import pytest

from evals import actions, selectors
from evals.models import DatasetItemRevision
from runs.actions import ActionError
from runs.demo.job_search import build_demo
from runs.models import Event
from runs.protocol.canonical import canonical_str


@pytest.fixture
def demo(workspace, settings):
    settings.WORKBENCH_REPLAY_EXECUTOR = "worker"
    return build_demo(workspace)


def _decisions(workspace, step_id):
    """Every decision recorded on ``step_id`` outside forks' copied history, straight from the events."""
    from runs.models import RunFork

    out = []
    for event in Event.objects.filter(run__workspace=workspace, type="human_gate_resolved", step_id=step_id):
        fork = RunFork.objects.filter(run=event.run).first()
        if fork is not None and (fork.mode == "replay" or event.seq <= fork.history):
            continue
        out.append((event.run.run_id, event.data["id"], event.seq, event.data["decision"]))
    return sorted(out)


@pytest.mark.django_db
def test_dataset_from_decided_gates_holds_exactly_those_decisions(workspace, demo):
    dataset = actions.do_create_dataset(workspace=workspace, name="search gate", actor="user:alice")
    before = dataset.revision
    items = actions.items_from_gates(workspace, "search")
    added, revision = actions.do_add_items(dataset=dataset, items=items, actor="user:alice")
    expected = _decisions(workspace, "search")
    assert len(expected) >= 3  # main (approved), rejected (rejected), completed (approved)
    assert added == len(expected)
    stored = selectors.items_at(dataset, revision)
    got = sorted(
        (i["source"]["runId"], i["source"]["eventId"], i["source"]["seq"], i["label"]) for i in stored
    )
    assert got == expected
    assert {i["label"] for i in stored} == {"approved", "rejected"}
    rejected = next(i for i in stored if i["label"] == "rejected")
    assert rejected["note"] == "Wrong seniority: redo the parse"
    assert rejected["input"] == {"profile": rejected["input"]["profile"]}  # the step's declared input
    assert rejected["input"]["profile"]["headline"] == "Staff Python engineer"  # as patched before the gate
    # nothing before it was filled
    assert selectors.items_at(dataset, before) == []
    # the same source twice does not duplicate
    again, same = actions.do_add_items(dataset=dataset, items=actions.items_from_gates(workspace, "search"))
    assert (again, same) == (0, revision)


@pytest.mark.django_db
def test_items_are_append_only_revisions_and_as_of_is_stable(workspace):
    dataset = actions.do_create_dataset(workspace=workspace, name="d")
    _, r1 = actions.do_add_items(dataset=dataset, items=[{"id": "a", "input": 1, "expected": 2}])
    frozen = canonical_str(selectors.items_at(dataset, r1))
    _, r2 = actions.do_add_items(
        dataset=dataset, items=[{"id": "a", "input": 1, "expected": 3}, {"input": 5}]
    )
    removed, r3 = actions.do_delete_items(dataset=dataset, item_ids=["a"], actor="user:alice")
    assert removed == 1 and r3 == r2 + 1
    assert canonical_str(selectors.items_at(dataset, r1)) == frozen
    assert [i["expected"] for i in selectors.items_at(dataset, r2) if i["id"] == "a"] == [3]
    assert [i["id"] for i in selectors.items_at(dataset, r3)] != ["a"]
    assert DatasetItemRevision.objects.filter(dataset=dataset).count() == 4  # nothing rewritten


@pytest.mark.django_db
def test_schemas_and_bad_input_are_refused_with_codes(workspace):
    dataset = actions.do_create_dataset(
        workspace=workspace, name="typed", input_schema={"type": "object", "required": ["q"]}
    )
    with pytest.raises(ActionError) as info:
        actions.do_add_items(dataset=dataset, items=[{"input": {"x": 1}}])
    assert info.value.code == "INVALID_INPUT"
    with pytest.raises(ActionError):
        actions.do_create_dataset(workspace=workspace, name="typed")
    with pytest.raises(ActionError):
        actions.do_create_dataset(workspace=workspace, name="bad", input_schema={"type": 5})
    assert dataset.revision == 0


@pytest.mark.django_db
def test_csv_and_json_uploads(workspace):
    rows = actions.items_from_upload(b'input,expected,label\n{"q":1},"yes",approved\nplain,,\n', "text/csv")
    assert rows == [{"input": {"q": 1}, "expected": "yes", "label": "approved"}, {"input": "plain"}]
    assert actions.items_from_upload(b'{"items":[{"input":1}]}', "application/json") == [{"input": 1}]
