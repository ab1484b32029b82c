"""Seed-004 item 31: defaults per operation type (temperature, thinking, citations), global and per
workspace, set by owners on the settings page, handed to the playground with the other levels."""

from __future__ import annotations

import pytest

from playground import actions, config
from playground.actions import SettingsError
from playground.models import OperationDefaults
from runs.models import Membership


def test_owners_set_defaults_per_operation_type_over_the_global_ones(workspace, alice, bob):
    OperationDefaults.objects.create(workspace=None, operation_type="rating", temperature=0.7, citations=True)
    owner = Membership.objects.get(user=alice, workspace=workspace)
    actions.do_set_operation_defaults(
        membership=owner, operation_type="rating", temperature="0.2", thinking="off", citations=""
    )
    found = config.operation_defaults(workspace)
    assert found["rating"] == {
        "temperature": {"value": 0.2, "scope": "workspace"},
        "thinking": {"value": False, "scope": "workspace"},
        "citations": {"value": True, "scope": "global"},
    }
    assert config.levels(workspace, alice)["operation_defaults"] == found
    for bad in (
        {"operation_type": "poetry"},
        {"temperature": "2.5"},
        {"temperature": "hot"},
        {"temperature": "nan"},
        {"thinking": "maybe"},
    ):
        kw = {"operation_type": "rating", "temperature": "", "thinking": "", "citations": "", **bad}
        with pytest.raises(SettingsError):
            actions.do_set_operation_defaults(membership=owner, **kw)
    reviewer = Membership.objects.get(user=bob, workspace=workspace)
    with pytest.raises(Exception) as info:
        actions.do_set_operation_defaults(
            membership=reviewer, operation_type="rating", temperature="1", thinking="", citations=""
        )
    assert "owner" in str(info.value)
    actions.do_set_operation_defaults(
        membership=owner, operation_type="rating", temperature="", thinking="", citations=""
    )
    assert not OperationDefaults.objects.filter(workspace=workspace).exists()  # nothing set: no row


def test_the_settings_page_form(client, alice, workspace):
    client.force_login(alice)
    page = client.get("/playground/settings/").content.decode()
    assert "Defaults per operation type" in page and 'data-operation="validation"' in page
    response = client.post(
        "/playground/settings/",
        {
            "action": "operation_defaults",
            "operation_type": "validation",
            "temperature": "0.1",
            "thinking": "on",
        },
    )
    assert response.status_code in (200, 302)
    row = OperationDefaults.objects.get(workspace=workspace, operation_type="validation")
    assert (row.temperature, row.thinking, row.citations) == (0.1, True, None)
    bad = client.post("/playground/settings/", {"action": "operation_defaults", "operation_type": "x"})
    assert bad.status_code == 400
