"""runs/migrations/_operations.py: ``CreateModels`` renders the new models into the migration
state as it is when it may (the executor's state, migrating forwards), and renders the related
models again as Django does when the state is a copy whose classes another registry rendered
(a state computed to migrate backwards): the earlier state keeps its classes as they were.
``RunPythonOnDatabase`` runs its code without rendering the state again, where ``RunPython``
renders all of it once an earlier operation left the state "delayed"."""

from __future__ import annotations

from typing import Any

from django.db import connection, migrations, models
from django.db.migrations.state import ModelState, ProjectState

from runs.migrations._operations import CreateModels, RunPythonOnDatabase


def _state() -> ProjectState:
    state = ProjectState()
    state.add_model(ModelState("shop", "Owner", [("id", models.AutoField(primary_key=True))]))
    assert state.apps.get_model("shop", "owner")  # rendered, as the executor renders it
    return state


def _create_item() -> CreateModels:
    return CreateModels(
        migrations.CreateModel(
            "Item",
            [
                ("id", models.AutoField(primary_key=True)),
                ("owner", models.ForeignKey("shop.Owner", models.CASCADE)),
            ],
        )
    )


def _related(model: type[models.Model]) -> list[str]:
    return [rel.related_model._meta.label for rel in model._meta.related_objects]


def test_forwards_the_new_models_are_rendered_beside_the_models_there():
    state = _state()
    owner = state.apps.get_model("shop", "owner")
    _create_item().state_forwards("shop", state)
    assert state.apps.get_model("shop", "owner") is owner  # not rendered again
    item = state.apps.get_model("shop", "item")
    assert item._meta.get_field("owner").related_model is owner
    assert _related(owner) == ["shop.Item"]  # the reverse relation, in this state


def test_on_a_copied_state_the_related_models_are_rendered_again():
    state = _state()
    owner = state.apps.get_model("shop", "owner")
    copy = state.clone()
    _create_item().state_forwards("shop", copy)
    new_owner = copy.apps.get_model("shop", "owner")
    assert new_owner is not owner
    assert _related(new_owner) == ["shop.Item"]
    assert _related(owner) == []  # the earlier state is as it was
    assert state.apps.get_model("shop", "owner") is owner


def test_a_state_not_rendered_stays_so_and_renders_the_new_models_when_read():
    state = ProjectState()
    state.add_model(ModelState("shop", "Owner", [("id", models.AutoField(primary_key=True))]))
    _create_item().state_forwards("shop", state)
    assert "apps" not in vars(state)
    assert _related(state.apps.get_model("shop", "owner")) == ["shop.Item"]


def _delayed_state() -> ProjectState:
    state = _state()
    migrations.AddField("owner", "name", models.CharField(max_length=10, default="")).state_forwards(
        "shop", state
    )
    assert state.is_delayed  # what AddField and AlterField leave
    return state


def test_run_python_on_database_renders_nothing_and_passes_no_models():
    seen: list[Any] = []
    state = _delayed_state()
    before = state.clone()
    registry = vars(before)["apps"]
    RunPythonOnDatabase(lambda apps, editor: seen.append((apps, editor.connection))).database_forwards(
        "shop", connection.schema_editor(), before, state
    )
    assert seen == [(None, connection)]
    assert vars(before)["apps"] is registry  # not rendered again

    plain = state.clone()
    registry = vars(plain)["apps"]
    migrations.RunPython(lambda apps, editor: seen.append(apps)).database_forwards(
        "shop", connection.schema_editor(), plain, state
    )
    assert vars(plain)["apps"] is not registry  # what RunPython does: every model rendered again
