"""runs/migrations/_operations.py: ``CreateModels`` renders the new models into the migration
state as it is when it may (the executor's state, migrating forwards), and renders the related
models again as Django does when the state is a copy whose classes another registry rendered
(a state computed to migrate backwards): the earlier state keeps its classes as they were."""

from __future__ import annotations

from django.db import migrations, models
from django.db.migrations.state import ModelState, ProjectState

from runs.migrations._operations import CreateModels


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
