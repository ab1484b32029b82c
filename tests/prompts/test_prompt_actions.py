"""Prompts as versioned releases: versions are immutable, labels are pointers, protected labels move
only through an approved promotion request; the permission table decides who may do what."""

from __future__ import annotations

import pytest
from workbench_sdk.prompts import Prompt

from runs.actions.core import ActionError
from runs.actions.permissions import ROLE_SCOPES
from runs.actions.prompts import (
    do_decide_promotion,
    do_move_label,
    do_protect_label,
    do_save_prompt_version,
)
from runs.models import PromotionStatus, PromptLabel, PromptVersion
from runs.presenters.prompts import compile_body, diff_lines, render_version, variables
from runs.selectors import prompts as sel

OWNER, TESTER, VIEWER = ROLE_SCOPES["owner"], ROLE_SCOPES["reviewer"], ROLE_SCOPES["viewer"]


def _save(workspace, user, text="Hello {{name}}", name="support/greeting", **kw):
    return do_save_prompt_version(workspace, name=name, body=text, scopes=TESTER, user=user, **kw)


def test_every_save_is_a_new_immutable_version_and_latest_follows(workspace, bob):
    v1 = _save(workspace, bob, tags=["support"])
    v2 = _save(workspace, bob, text="Hi {{name}}, about {{topic}}", config={"model": "m", "temperature": 0.2})
    assert (v1.number, v2.number) == (1, 2)
    prompt = sel.get_prompt(workspace, "support/greeting")
    assert sel.labels_of(prompt) == {"latest": 2}
    assert prompt.tags == ["support"]
    v1.message = "changed"
    with pytest.raises(ValueError, match="immutable"):
        v1.save()
    assert PromptVersion.objects.get(pk=v1.pk).message == ""
    doc = sel.version_doc(sel.find_version(workspace, "support/greeting", label="latest"))
    assert doc["version"] == 2 and doc["variables"] == ["name", "topic"]
    assert doc["config"] == {"model": "m", "temperature": 0.2} and doc["created_by"] == "bob"
    diff = sel.version_diff(sel.previous_version(v2), v2)
    assert diff["summary"] == {"added": 6, "removed": 1}  # a line changed; [config] and its 4 lines are new


def test_a_later_save_with_other_tags_retags_the_prompt(workspace, bob):
    _save(workspace, bob, tags=["support"])
    v2 = _save(workspace, bob, text="Hi {{name}}", tags=["support", "v2"])
    assert v2.number == 2
    assert sel.get_prompt(workspace, "support/greeting").tags == ["support", "v2"]


def test_chat_prompts_and_bad_input_are_refused_with_a_code(workspace, bob):
    body = [{"role": "system", "content": "Be {{tone}}"}, {"role": "user", "content": "{{q}}"}]
    v = do_save_prompt_version(workspace, name="chat one", type="chat", body=body, scopes=TESTER, user=bob)
    assert v.body_json == body
    bad = [
        dict(name="", body="x"),
        dict(name="a//b", body="x"),
        dict(name="/a", body="x"),
        dict(name="x\x00y", body="x"),
        dict(name="chat one", body="plain text"),  # a chat prompt's body is messages
        dict(name="chat one", body=[{"role": "robot", "content": "x"}]),
        dict(name="chat one", body=[], type="chat"),
        dict(name="chat one", body=body, type="text"),
        dict(name="t", body="x", config=[1]),
        dict(name="t", body="x", tags="one"),
        dict(name="t", body="x", type="image"),
    ]
    for kw in bad:
        with pytest.raises(ActionError) as info:
            do_save_prompt_version(workspace, scopes=TESTER, user=bob, **kw)
        assert info.value.code in {"INVALID_INPUT", "PROMPT_TYPE_MISMATCH"}, kw
    assert PromptVersion.objects.count() == 1


def test_viewers_never_save_or_move_labels(workspace, vera, bob):
    with pytest.raises(ActionError) as info:
        do_save_prompt_version(workspace, name="p", body="x", scopes=VIEWER, user=vera)
    assert info.value.code == "FORBIDDEN"
    _save(workspace, bob, name="p")
    with pytest.raises(ActionError) as info:
        do_move_label(workspace, name="p", label="staging", version=1, scopes=VIEWER, user=vera)
    assert info.value.code == "FORBIDDEN"
    assert not PromptLabel.objects.filter(name="staging").exists()


def test_unprotected_labels_move_directly_and_rollback_is_moving_back(workspace, bob, alice):
    _save(workspace, bob, name="p", text="one")
    _save(workspace, bob, name="p", text="two")
    for scopes, user in ((TESTER, bob), (OWNER, alice)):
        move = do_move_label(workspace, name="p", label="production", version=2, scopes=scopes, user=user)
        assert move.label is not None and move.request is None
    assert sel.find_version(workspace, "p").number == 2  # production is the default label
    do_move_label(workspace, name="p", label="production", version=1, scopes=TESTER, user=bob)
    assert sel.find_version(workspace, "p").body_json == "one"
    for label, version, code in (
        ("latest", 1, "LABEL_RESERVED"),
        ("Prod!", 1, "INVALID_INPUT"),
        ("x", 9, "NOT_FOUND"),
    ):
        with pytest.raises(ActionError) as info:
            do_move_label(workspace, name="p", label=label, version=version, scopes=TESTER, user=bob)
        assert info.value.code == code


def test_a_protected_label_moves_only_when_someone_else_approves(workspace, alice, bob, vera):
    _save(workspace, bob, name="p", text="one")
    do_move_label(workspace, name="p", label="production", version=1, scopes=TESTER, user=bob)
    _save(workspace, bob, name="p", text="two")
    with pytest.raises(ActionError) as info:
        do_protect_label(workspace, label="production", protected=True, scopes=TESTER, user=bob)
    assert info.value.code == "FORBIDDEN"
    do_protect_label(workspace, label="production", protected=True, scopes=OWNER, user=alice)
    assert sel.protected_labels(workspace) == ["production"]

    move = do_move_label(
        workspace, name="p", label="production", version=2, scopes=TESTER, user=bob, note="better"
    )
    request = move.request
    assert move.label is None and request.status == PromotionStatus.PENDING
    assert (request.from_version.number, request.to_version.number) == (1, 2)
    assert sel.find_version(workspace, "p").number == 1  # not moved yet
    with pytest.raises(ActionError) as info:
        do_move_label(workspace, name="p", label="production", version=2, scopes=TESTER, user=bob)
    assert info.value.code == "PROMOTION_PENDING"
    assert [r.pk for r in sel.pending_promotions(workspace)] == [request.pk]

    for scopes, user, code in ((TESTER, bob, "SELF_APPROVAL"), (VIEWER, vera, "FORBIDDEN")):
        with pytest.raises(ActionError) as info:
            do_decide_promotion(workspace, request_id=request.pk, approve=True, scopes=scopes, user=user)
        assert info.value.code == code
    decided = do_decide_promotion(workspace, request_id=request.pk, approve=True, scopes=OWNER, user=alice)
    assert decided.status == "approved" and decided.decided_by == alice and decided.requested_by == bob
    assert sel.find_version(workspace, "p").number == 2
    with pytest.raises(ActionError) as info:
        do_decide_promotion(workspace, request_id=request.pk, approve=False, scopes=OWNER, user=alice)
    assert info.value.code == "ALREADY_DECIDED"


def test_rejecting_leaves_the_label_and_outsiders_see_nothing(workspace, other_workspace, alice, bob):
    _save(workspace, bob, name="p", text="one")
    do_move_label(workspace, name="p", label="production", version=1, scopes=TESTER, user=bob)
    _save(workspace, bob, name="p", text="two")
    do_protect_label(workspace, label="production", protected=True, scopes=OWNER, user=alice)
    request = do_move_label(
        workspace, name="p", label="production", version=2, scopes=TESTER, user=bob
    ).request
    with pytest.raises(ActionError) as info:  # another workspace: no such request
        do_decide_promotion(other_workspace, request_id=request.pk, approve=True, scopes=OWNER, user=alice)
    assert info.value.code == "NOT_FOUND"
    assert sel.find_version(other_workspace, "p", label="latest") is None
    do_decide_promotion(workspace, request_id=request.pk, approve=False, scopes=OWNER, user=alice, note="no")
    assert sel.find_version(workspace, "p").number == 1
    assert sel.pending_promotions(workspace) == []


def test_compile_and_diff_are_plain_functions():
    assert variables([{"role": "user", "content": "{{ a }} {{b}} {{a}}"}]) == ["a", "b"]
    assert compile_body("Hi {{ name }} {{other}}", {"name": "Ann"}) == "Hi Ann {{other}}"
    assert compile_body([{"role": "user", "content": "{{x}}"}], {"x": 1}) == [
        {"role": "user", "content": "1"}
    ]
    rows = diff_lines(render_version("a\nb", {}), render_version("a\nc", {"t": 1}))
    assert [r["kind"] for r in rows] == ["same", "removed", "added", "added", "added", "added", "added"]


def test_the_sdk_compiles_like_the_server():
    for body in ("a {{ x }} {{y}} {{x}} {{ not closed", [{"role": "user", "content": "{{x}}-{{z}}"}]):
        p = Prompt.from_doc({"name": "p", "version": 1, "type": "text", "body": body})
        assert p.compile(x=1, y="two") == compile_body(body, {"x": 1, "y": "two"})
