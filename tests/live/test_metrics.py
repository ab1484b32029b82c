"""/live/metrics: the live path's counters, for staff only."""

from __future__ import annotations

import pytest


@pytest.mark.django_db
def test_metrics_for_staff_only(client, alice, django_user_model):
    from runs.live.publisher import metrics

    metrics.reset()
    metrics.add("drops", 2)
    metrics.add("resyncs")
    assert client.get("/live/metrics").status_code == 302  # anonymous: to the admin login
    client.force_login(alice)
    assert client.get("/live/metrics").status_code == 302  # a member, but not staff
    staff = django_user_model.objects.create_user("sam", password="sam-password-123", is_staff=True)
    client.force_login(staff)
    response = client.get("/live/metrics")
    assert response.status_code == 200
    body = response.json()
    assert body["counters"]["drops"] == 2 and body["counters"]["resyncs"] == 1
    assert body["layer"] in ("InMemoryChannelLayer", "RedisChannelLayer")
    assert client.post("/live/metrics").status_code == 405
