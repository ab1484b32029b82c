"""review.mcp: the queue tools' operations over principals (the MCP adapter forwards to them), and
their place in the one MCP server's catalog."""

from __future__ import annotations

import pytest

from runs.mcp.operations import Refused

pytestmark = pytest.mark.django_db


def test_queue_tools_create_add_claim_score_progress(workspace, alice, bob, vera, make_run):
    from accounts.principals import principal_for_membership
    from review import mcp as tools
    from runs.mcp.server import tool_catalog
    from runs.models import Membership

    def who(user):
        return principal_for_membership(Membership.objects.get(user=user, workspace=workspace))

    make_run("run_0")
    names = {t["name"]: t["scope"] for t in tool_catalog()}
    assert names["claim_review_item"] == "review" and names["get_review_progress"] == "read"
    created = tools.create_review_queue(
        who(alice), name="Mcp", score_configs=[{"name": "ok", "dataType": "BOOLEAN"}]
    )
    qid = created["queueId"]
    with pytest.raises(Refused) as refused:
        tools.create_review_queue(
            who(bob), name="Nope", score_configs=[{"name": "ok", "dataType": "BOOLEAN"}]
        )
    assert refused.value.code == "FORBIDDEN"  # reviewers cannot edit queues
    assert tools.add_review_items(who(alice), queue_id=qid, items=[{"runId": "run_0"}])["added"] == 1
    with pytest.raises(Refused) as refused:
        tools.claim_review_item(who(vera), queue_id=qid)
    assert refused.value.code == "FORBIDDEN"  # viewers cannot review
    item = tools.claim_review_item(who(bob), queue_id=qid)
    assert item["runId"] == "run_0"
    with pytest.raises(Refused) as refused:
        tools.submit_review_scores(who(bob), queue_id=qid, item_id=item["itemId"], scores={"ok": "maybe"})
    assert refused.value.code == "INVALID_INPUT" and "ok: choose yes or no" in refused.value.message
    done = tools.submit_review_scores(who(bob), queue_id=qid, item_id=item["itemId"], scores={"ok": True})
    assert done["annotationSeq"] > 0
    read = tools.get_review_progress(who(vera), queue_id=qid)
    assert read["progress"]["reviews_done"] == 1
    with pytest.raises(Refused) as refused:
        tools.get_review_progress(who(vera), queue_id="q_missing")
    assert refused.value.code == "UNKNOWN_QUEUE"
