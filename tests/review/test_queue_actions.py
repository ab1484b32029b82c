"""review.actions: queues, items, claims under reservation (a frozen clock), scores, the run's
annotation event, blind mode, deleting a queue; the claim race on PostgreSQL."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from runs.actions import ActionError

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
CONFIGS = [
    {"name": "correct", "dataType": "NUMERIC", "minValue": 1, "maxValue": 5, "description": "Facts right"},
    {
        "name": "tone",
        "dataType": "CATEGORICAL",
        "categories": [{"label": "good", "value": 1}, {"label": "bad", "value": 0}],
    },
    {"name": "send", "dataType": "BOOLEAN"},
]


@pytest.fixture
def queue(workspace):
    from review.actions import do_create_queue

    return do_create_queue(
        workspace=workspace, name="Letters", score_configs=CONFIGS, reservation_seconds=60, actor="user:alice"
    )


@pytest.fixture
def runs(make_run):
    return [make_run(f"run_{i}") for i in range(3)]


def add(queue, *run_ids, **extra):
    from review.actions import do_add_items

    return do_add_items(queue=queue, items=[{"runId": r, **extra} for r in run_ids], actor="user:alice")


def test_a_queue_keeps_langfuse_shaped_configs_and_refuses_bad_ones(workspace, queue):
    from review.actions import do_create_queue

    configs = list(queue.score_configs.values_list("name", "data_type", "min_value", "max_value"))
    assert configs == [
        ("correct", "NUMERIC", 1, 5),
        ("tone", "CATEGORICAL", None, None),
        ("send", "BOOLEAN", None, None),
    ]
    bad = [
        ({"name": "x", "dataType": "TEXT"}, "scoreConfigs[0].dataType"),
        ({"name": "x", "dataType": "NUMERIC", "minValue": 5, "maxValue": 1}, "scoreConfigs[0].minValue"),
        ({"name": "x", "dataType": "CATEGORICAL", "categories": []}, "scoreConfigs[0].categories"),
        ({"name": "", "dataType": "BOOLEAN"}, "scoreConfigs[0].name"),
    ]
    for config, path in bad:
        with pytest.raises(ActionError) as err:
            do_create_queue(workspace=workspace, name="Other", score_configs=[config])
        assert err.value.code == "INVALID_INPUT" and err.value.path == path
    with pytest.raises(ActionError) as err:
        do_create_queue(workspace=workspace, name="Letters", score_configs=CONFIGS)
    assert err.value.code == "CONFLICT"


def test_items_are_added_once_and_only_from_the_workspace(queue, runs, charlie, other_workspace, workflow):
    from runs import actions

    assert add(queue, "run_0", "run_1", "run_0").added == 2
    again = add(queue, "run_1", "run_2")
    assert (again.added, again.already) == (1, 1)
    assert add(queue, "run_0", kind="step", stepId="parse").added == 1
    actions.do_start_run(workspace=other_workspace, workflow=workflow, actor="x", run_id="theirs")
    with pytest.raises(ActionError) as err:
        add(queue, "theirs")  # another workspace's run is as missing as a missing one
    assert err.value.code == "UNKNOWN_RUN"
    with pytest.raises(ActionError):
        add(queue, "run_0", kind="event", seq=10_000)
    assert queue.items.count() == 4


def test_claim_reserves_and_an_expired_reservation_frees_the_item(queue, runs, alice, bob):
    from review.actions import do_claim_next

    add(queue, "run_0")
    first = do_claim_next(queue=queue, user=alice, now=T0)
    assert first is not None and first.run.run_id == "run_0"
    assert do_claim_next(queue=queue, user=alice, now=T0 + timedelta(seconds=5)) == first  # still hers
    assert do_claim_next(queue=queue, user=bob, now=T0 + timedelta(seconds=59)) is None  # reserved
    # the clock passes the 60 s reservation: the item is free again
    assert do_claim_next(queue=queue, user=bob, now=T0 + timedelta(seconds=61)) == first
    assert do_claim_next(queue=queue, user=alice, now=T0 + timedelta(seconds=62)) is None


def test_submitting_scores_appends_an_annotation_event_in_the_export(client, queue, runs, alice, bob):
    import json

    from review.actions import REVIEW_TAG, do_claim_next, do_submit_review
    from review.models import Score
    from runs.models import Event

    add(queue, "run_0")
    item = do_claim_next(queue=queue, user=bob)
    with pytest.raises(ActionError) as err:
        do_submit_review(item=item, user=bob, answers={"correct": 9, "tone": "good", "send": True})
    assert err.value.message == "correct: enter a value of at most 5"
    with pytest.raises(ActionError) as err:
        do_submit_review(item=item, user=bob, answers={"correct": 4, "tone": "good"})
    assert err.value.message == "send: this field cannot be empty"
    scores = do_submit_review(
        item=item, user=bob, answers={"correct": "4", "tone": "good", "send": "true"}, comment="fine"
    )
    assert [(s.name, s.value, s.string_value) for s in scores] == [
        ("correct", 4.0, ""),
        ("tone", 1.0, "good"),
        ("send", 1.0, "True"),
    ]
    event = Event.objects.get(run=item.run, type="annotation")
    assert scores[0].annotation_seq == event.seq and event.actor == "user:bob"
    body = json.loads(event.body)
    assert body["tags"] == [REVIEW_TAG]
    text = json.loads(body["text"])
    assert text["type"] == "review.completed" and text["reviewer"] == "bob" and text["comment"] == "fine"
    assert {s["name"]: s["value"] for s in text["scores"]} == {"correct": 4.0, "tone": 1.0, "send": 1.0}
    # in the run's signed export
    client.force_login(alice)
    bundle = client.get("/runs/run_0/export/").content.decode()
    assert REVIEW_TAG in bundle and "review.completed" in bundle
    # the run page says it in words, not as the JSON it is stored as
    page = client.get("/runs/run_0/").content.decode()
    assert f"Review in “{queue.name}” by bob: correct 4; tone “good”; send yes. “fine”" in page
    assert "review.completed" not in page
    # done: not given to the same reviewer again; a second submit is refused
    assert do_claim_next(queue=queue, user=bob) is None
    with pytest.raises(ActionError) as err:
        do_submit_review(item=item, user=bob, answers={"correct": 4, "tone": "good", "send": True})
    assert err.value.code == "NOT_CLAIMED"
    assert Score.objects.count() == 3


def test_n_reviews_per_item_and_skip(workspace, runs, alice, bob, vera):
    from review.actions import do_claim_next, do_create_queue, do_skip

    queue = do_create_queue(workspace=workspace, name="Twice", score_configs=CONFIGS[2:], reviews_per_item=2)
    add(queue, "run_0")
    a = do_claim_next(queue=queue, user=alice)
    b = do_claim_next(queue=queue, user=bob)
    assert a == b  # two places on one item
    assert do_claim_next(queue=queue, user=vera) is None
    do_skip(item=b, user=bob)
    assert do_claim_next(queue=queue, user=vera) == a  # bob's place is free again
    assert do_claim_next(queue=queue, user=bob) is None  # skipped: not offered to bob again


def test_deleting_a_queue_keeps_the_reviews(queue, runs, bob):
    from review.actions import do_claim_next, do_delete_queue, do_submit_review
    from review.models import Item, Score
    from runs.models import Event

    add(queue, "run_0")
    item = do_claim_next(queue=queue, user=bob)
    do_submit_review(item=item, user=bob, answers={"correct": 3, "tone": "bad", "send": False})
    do_delete_queue(queue=queue)
    assert Item.objects.count() == 0
    kept = list(Score.objects.values_list("queue_name", "name", "reviewer_name", "queue"))
    assert kept == [
        ("Letters", "correct", "bob", None),
        ("Letters", "tone", "bob", None),
        ("Letters", "send", "bob", None),
    ]
    assert Event.objects.filter(type="annotation").count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_twenty_races_for_the_last_item_on_postgresql(workspace, make_run, django_user_model):
    """20 rounds: 20 reviewers race (a barrier) for a queue's single free place; one gets it. Then
    20 claimers race for 10 items: each item is given once."""
    from django.db import connection, connections

    from review.actions import do_claim_next, do_create_queue

    if connection.vendor != "postgresql":
        pytest.skip("the race needs PostgreSQL (DATABASE_URL=postgres://...)")
    make_run("run_0")
    users = [django_user_model.objects.create_user(f"r{i}") for i in range(20)]

    def race(queue, claimers):
        barrier = threading.Barrier(len(claimers))
        got: list = []
        errors: list = []

        def claim(user):
            try:
                barrier.wait()
                item = do_claim_next(queue=queue, user=user)
                if item is not None:
                    got.append(item.pk)
            except Exception as exc:  # noqa: BLE001 (reported below)
                errors.append(exc)
            finally:
                connections.close_all()

        threads = [threading.Thread(target=claim, args=(u,)) for u in claimers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        return got

    for round_ in range(20):
        queue = do_create_queue(workspace=workspace, name=f"Race {round_}", score_configs=CONFIGS[2:])
        add(queue, "run_0")
        got = race(queue, users)
        assert len(got) == 1, f"round {round_}: the last item was given {len(got)} times"
    for i in range(1, 10):
        make_run(f"run_{i}")
    queue = do_create_queue(workspace=workspace, name="Wide", score_configs=CONFIGS[2:])
    add(queue, *[f"run_{i}" for i in range(10)])
    got = race(queue, users)
    assert len(got) == 10 and len(set(got)) == 10


def test_a_review_of_a_finished_run_is_appended_and_changes_nothing_else(
    client, queue, runs, workspace, alice, bob
):
    """Post-hoc review: the run already ended (cancelled here); the review still lands in its record
    as an annotation, live and in its export, and the run stays as it was."""
    from review.actions import REVIEW_TAG, do_claim_next, do_submit_review
    from runs import actions as run_actions
    from runs.engine import commands as cmd
    from runs.models import Event, Run

    run_actions.do_command(workspace=workspace, run_id="run_1", command=cmd.CancelRun(reason="done"))
    before = Run.objects.get(workspace=workspace, run_id="run_1")
    assert before.is_finished
    add(queue, "run_1")
    item = do_claim_next(queue=queue, user=bob)
    scores = do_submit_review(item=item, user=bob, answers={"correct": 5, "tone": "good", "send": True})
    after = Run.objects.get(pk=before.pk)
    event = Event.objects.get(run=after, type="annotation")
    assert scores[0].annotation_seq == event.seq == before.last_seq + 1
    assert (after.status, after.ended_at, after.pending_gates) == (
        before.status,
        before.ended_at,
        before.pending_gates,
    )
    client.force_login(alice)
    assert REVIEW_TAG in client.get("/runs/run_1/export/").content.decode()


def test_a_queue_with_assigned_reviewers_gives_items_to_them_only(workspace, runs, alice, bob):
    from review.actions import do_claim_next, do_create_queue

    for bad in (["nobody"], "bob", [""]):
        with pytest.raises(ActionError) as err:
            do_create_queue(workspace=workspace, name="x", score_configs=CONFIGS, reviewers=bad)
        assert err.value.path == "reviewers"
    assigned = do_create_queue(
        workspace=workspace, name="Bob's", score_configs=CONFIGS, reviewers=["bob"], actor="user:alice"
    )
    assert list(assigned.reviewers.all()) == [bob]
    add(assigned, "run_0")
    assert do_claim_next(queue=assigned, user=alice) is None  # not assigned: nothing for her
    assert do_claim_next(queue=assigned, user=bob).run.run_id == "run_0"


def test_a_default_dataset_is_a_dataset_id_and_items_offer_it(client, workspace, runs, alice, bob):
    from review.actions import do_claim_next, do_create_queue

    with pytest.raises(ActionError) as err:
        do_create_queue(workspace=workspace, name="x", score_configs=CONFIGS, default_dataset="no spaces")
    assert err.value.path == "defaultDataset"
    queue = do_create_queue(
        workspace=workspace, name="To ds", score_configs=CONFIGS, default_dataset="ds_abc"
    )
    add(queue, "run_0")
    item = do_claim_next(queue=queue, user=bob)
    client.force_login(bob)
    page = client.get(f"/review/{queue.queue_id}/items/{item.item_id}/").content.decode()
    assert "/evals/datasets/add-runs/?run=run_0&amp;dataset=ds_abc" in page
