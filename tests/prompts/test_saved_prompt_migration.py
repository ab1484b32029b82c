"""The data migration: each playground.SavedPrompt becomes version 1 of a prompt of its workspace."""

from __future__ import annotations

import importlib

from django.apps import apps

from playground.models import SavedPrompt
from runs.models import Prompt
from runs.selectors import prompts as sel

migration = importlib.import_module("playground.migrations.0008_saved_prompts_become_versions")


def test_saved_prompts_become_version_one(workspace, other_workspace, alice):
    SavedPrompt.objects.create(workspace=workspace, name="plain", prompt="Say {{x}}", created_by=alice)
    SavedPrompt.objects.create(
        workspace=workspace,
        name="with system",
        system_prompt="Be brief",
        prompt="Q",
        operation_type="rating",
        options={"temperature": 0.3},
    )
    SavedPrompt.objects.create(workspace=workspace, name="a//b?", prompt="odd name")
    SavedPrompt.objects.create(workspace=workspace, name="a-b", prompt="a name as it is")
    SavedPrompt.objects.create(workspace=workspace, name="x?", prompt="tidied")
    SavedPrompt.objects.create(workspace=workspace, name="x!", prompt="tidied to a taken name")
    SavedPrompt.objects.create(workspace=other_workspace, name="plain", prompt="theirs")
    Prompt.objects.all().delete()  # the migration already ran on the empty test database
    migration.forward(apps, None)

    plain = sel.find_version(workspace, "plain", label="latest")
    assert (plain.number, plain.prompt.type, plain.body_json) == (1, "text", "Say {{x}}")
    assert plain.created_by == alice
    chat = sel.find_version(workspace, "with system", label="latest")
    assert chat.prompt.type == "chat"
    assert chat.body_json == [{"role": "system", "content": "Be brief"}, {"role": "user", "content": "Q"}]
    assert chat.config_json == {"operation_type": "rating", "params": {"temperature": 0.3}}
    names = sorted(Prompt.objects.filter(workspace=workspace).values_list("name", flat=True))
    assert names == ["a-b", "a/b", "plain", "with system", "x", "x-2"]
    assert sel.find_version(other_workspace, "plain", label="latest").body_json == "theirs"
