"""runs.engine.gatepolicy: checking, merging, counting votes, escalation tiers (pure)."""

from __future__ import annotations

import pytest

from runs.engine import gatepolicy as gp
from runs.engine.errors import EngineError


def test_check_normalises_and_keeps_only_what_is_set():
    assert gp.check({}) == {}
    checked = gp.check(
        {"quorum": 2, "assignees": [" bob ", "bob", "role:owner"], "steps": {"s": {"quorum": 3}}}
    )
    assert checked == {"quorum": 2, "assignees": ["bob", "role:owner"], "steps": {"s": {"quorum": 3}}}


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ([], "policy"),
        ({"quorum": 0}, "policy.quorum"),
        ({"quorum": True}, "policy.quorum"),
        ({"quorum": 21}, "policy.quorum"),
        ({"rejections": "2"}, "policy.rejections"),
        ({"separationOfDuties": "yes"}, "policy.separationOfDuties"),
        ({"assignees": "bob"}, "policy.assignees"),
        ({"assignees": ["role:admin"]}, "policy.assignees[0]"),
        ({"escalation": [{"afterSeconds": 0, "notify": ["a"]}]}, "policy.escalation[0]"),
        ({"escalation": [{"afterSeconds": 60, "notify": []}]}, "policy.escalation[0].notify"),
        (
            {"escalation": [{"afterSeconds": 60, "notify": ["a"]}, {"afterSeconds": 60, "notify": ["b"]}]},
            "policy.escalation[1]",
        ),
        ({"nope": 1}, "policy"),
        ({"steps": {"s": {"quorum": -1}}}, "policy.steps.s.quorum"),
    ],
)
def test_check_refuses_with_a_path(raw, path):
    with pytest.raises(EngineError) as err:
        gp.check(raw)
    assert err.value.code == "INVALID_INPUT" and err.value.path == path


def test_merge_later_layers_win_key_by_key_and_steps_narrow():
    default = {"quorum": 2, "separationOfDuties": True}
    workflow = {"assignees": ["bob"]}
    run = {"quorum": 3, "steps": {"review": {"quorum": 1, "rejections": 2}}}
    policy = gp.merge(default, workflow, run, step_id="review")
    assert (policy.quorum, policy.rejections, policy.separation_of_duties) == (1, 2, True)
    assert policy.assignees == ("bob",)
    assert gp.merge(default, workflow, run, step_id="publish").quorum == 3
    # a host's bad metadata is skipped, never fatal
    assert gp.merge(default, {"quorum": "lots"}, step_id="x").quorum == 2
    assert gp.merge().to_json() == gp.DEFAULT.to_json()


def test_the_hosts_layer_asks_for_more_never_for_less():
    owner = {"quorum": 2, "rejections": 2, "separationOfDuties": True, "assignees": ["bob"]}
    looser = {"quorum": 1, "rejections": 3, "separationOfDuties": False, "assignees": ["dave"]}
    policy = gp.merge(owner, host=looser)
    assert (policy.quorum, policy.rejections, policy.separation_of_duties) == (2, 2, True)
    assert policy.assignees == ("dave",)  # who is asked first: the host's
    stricter = {"steps": {"pay": {"quorum": 3, "rejections": 1, "separationOfDuties": True}}}
    pay = gp.merge({"quorum": 2, "rejections": 2}, step_id="pay", host=stricter)
    assert (pay.quorum, pay.rejections, pay.separation_of_duties) == (3, 1, True)
    assert gp.merge({"quorum": 2}, step_id="other", host=stricter).quorum == 2
    assert gp.merge(host={"quorum": 2}).quorum == 2  # no owner's policy: the host's
    assert gp.merge(owner, host={"quorum": "lots"}).quorum == 2  # a bad host layer is skipped


def test_tally_quorum_and_rejections():
    two = gp.GatePolicy(quorum=2)
    assert gp.tally(two, [("a", "approved")]).outcome is None
    assert gp.tally(two, [("a", "approved"), ("b", "edited")]).outcome == "approved"
    assert gp.tally(two, [("a", "approved"), ("b", "rejected")]).outcome == "rejected"  # one rejects
    lenient = gp.GatePolicy(quorum=2, rejections=2)
    assert gp.tally(lenient, [("a", "rejected")]).outcome is None
    assert gp.tally(lenient, [("a", "rejected"), ("b", "approved"), ("c", "approved")]).outcome == "approved"
    assert gp.tally(lenient, [("a", "rejected"), ("b", "rejected")]).outcome == "rejected"


def test_due_tiers_and_limit():
    policy = gp.merge(
        {"escalation": [{"afterSeconds": 60, "notify": ["a"]}, {"afterSeconds": 600, "notify": ["b"]}]}
    )
    assert gp.due_tiers(policy, 59, set()) == []
    assert gp.due_tiers(policy, 60, set()) == [0]
    assert gp.due_tiers(policy, 601, {0}) == [1]
    assert gp.due_tiers(policy, 601, {0, 1}) == []
    assert gp.limit_seconds(policy, set()) == 60 and gp.limit_seconds(policy, {0}) == 600
    assert gp.limit_seconds(policy, {0, 1}) is None


def test_names_user_directly_or_by_role():
    assert gp.names_user(("bob",), "bob", None)
    assert gp.names_user(("role:reviewer",), "dave", "reviewer")
    assert not gp.names_user(("role:owner",), "dave", "reviewer")
