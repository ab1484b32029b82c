"""Migration operations for the squashed migrations (issue 53): many models created at once,
unique constraints named as the chain named them, and Python run on the database alone.

Each ``CreateModel`` makes Django's migration state render again every model related to the new
one, and through the workspace and the user that is nearly every model of the project: an app's
migration that creates its models one by one renders them a few thousand times (most of what
``migrate`` on an empty database cost). ``CreateModels`` adds all of its models to the state and
renders once (on the executor's state migrating forwards only the new models: the related ones as
they are, see ``_rendered_in_place``), then creates their tables one after another (foreign keys among them included: the
schema editor adds those constraints once every table is there, or SQLite checks them on use).
What it creates is what the same ``CreateModel`` operations create (scripts/migration_schema.py
compares the schemas).
"""

from __future__ import annotations

from typing import Any

from django.db import router
from django.db.migrations.operations import CreateModel, RunPython
from django.db.migrations.operations.base import Operation
from django.db.migrations.state import ModelState, ProjectState


def _reference(ref: Any, app_label: str) -> tuple[str, str]:
    """``"app.Model"``, ``"Model"`` or a model class: its (app label, model name) key."""
    if isinstance(ref, str):
        label, _, name = ref.rpartition(".")
        return (label or app_label, name.lower())
    return (ref._meta.app_label, ref._meta.model_name)


def _rendered_in_place(state: ProjectState, keys: list[tuple[str, str]]) -> bool:
    """Whether the new models can be rendered into the state's registry as it is: none of them is
    there yet, and every model they point at (relations, through models, bases) is either one of
    them or was rendered by this very registry, as on the executor's state migrating forwards.

    Django renders again every model related to a new one (for a new model pointing at the
    user: nearly all of them) so that the state before the operation, a copy of the registry
    that shares its model classes, keeps classes without the new relations. Only the schema
    editor's ``create_model`` reads that earlier state here, and it reads none of its models.
    Elsewhere (a state copied to go backwards, whose classes another registry rendered) the
    related models are rendered again as Django does.
    """
    apps = state.apps
    new = set(keys)
    for key in keys:
        if apps.all_models.get(key[0], {}).get(key[1]) is not None:
            return False
        model = state.models[key]
        refs = [base for base in model.bases if isinstance(base, str) or hasattr(base, "_meta")]
        for field in model.fields.values():
            if field.is_relation and field.remote_field.model != "self":
                refs.append(field.remote_field.model)
                if getattr(field.remote_field, "through", None) is not None:
                    refs.append(field.remote_field.through)
        for ref in refs:
            target = _reference(ref, key[0])
            if target in new:
                continue
            found = apps.all_models.get(target[0], {}).get(target[1])
            if found is None or found._meta.apps is not apps:
                return False
    return True


class CreateModels(Operation):
    """``CreateModel`` operations (of one app) applied as one state change."""

    reversible = True

    def __init__(self, *operations: CreateModel) -> None:
        self.operations = operations
        super().__init__()

    def deconstruct(self) -> tuple[str, tuple[CreateModel, ...], dict[str, Any]]:
        return (self.__class__.__qualname__, self.operations, {})

    def state_forwards(self, app_label: str, state: ProjectState) -> None:
        keys = []
        for op in self.operations:  # what CreateModel.state_forwards adds, without the render
            key = (app_label, op.name_lower)
            state.models[key] = ModelState(
                app_label,
                op.name,
                list(op.fields),
                dict(op.options),
                tuple(op.bases or ()),
                list(op.managers or []),
            )
            keys.append(key)
        if vars(state).get("_relations") is not None:  # computed already: kept up to date
            for key in keys:
                state.resolve_model_relations(key)
        if "apps" not in vars(state):
            return  # not rendered: whatever reads the models renders the whole state
        if _rendered_in_place(state, keys):
            state.apps.render_multiple([state.models[key] for key in keys])
        else:
            state.reload_models(keys, delay=False)  # once, every related model

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        for op in self.operations:
            op.database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        for op in reversed(self.operations):
            op.database_backwards(app_label, schema_editor, from_state, to_state)

    def describe(self) -> str:
        return "Create models " + ", ".join(op.name for op in self.operations)

    @property
    def migration_name_fragment(self) -> str:
        return "models"

    def references_model(self, name: str, app_label: str) -> bool:
        return any(op.references_model(name, app_label) for op in self.operations)


class NameUniqueAsAltered(Operation):
    """PostgreSQL: the unique constraint of each field named here gets the name an ``AlterField``
    gives one (``<table>_<column>_<hash>_uniq``) instead of the one ``CREATE TABLE`` gave it
    (``<table>_<column>_key``). For a squash of a chain that made the field unique by an
    ``AlterField``: both chains then leave the same schema (scripts/migration_schema.py). No
    state change; SQLite (whose unique constraints have no name) and swapped models: nothing.
    """

    reduces_to_sql = False
    reversible = True

    def __init__(self, *fields: tuple[str, str]) -> None:
        self.fields = fields
        super().__init__()

    def deconstruct(self) -> tuple[str, tuple[tuple[str, str], ...], dict[str, Any]]:
        return (self.__class__.__qualname__, self.fields, {})

    def state_forwards(self, app_label: str, state: ProjectState) -> None:
        pass

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        quote = schema_editor.quote_name
        for model_name, field_name in self.fields:
            model = to_state.apps.get_model(app_label, model_name)
            if not self.allow_migrate_model(schema_editor.connection.alias, model):
                continue
            table, column = model._meta.db_table, model._meta.get_field(field_name).column
            target = schema_editor._create_index_name(table, [column], suffix="_uniq")
            for name in schema_editor._constraint_names(model, [column], unique=True, primary_key=False):
                if name != target:
                    schema_editor.execute(f"ALTER TABLE {quote(table)} RENAME CONSTRAINT {quote(name)} TO {quote(target)}")

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        pass  # the tables go with the models created before it

    def describe(self) -> str:
        return "Name unique constraints as AlterField does: " + ", ".join(".".join(f) for f in self.fields)

    @property
    def migration_name_fragment(self) -> str:
        return "unique_names"


class RunPythonOnDatabase(RunPython):
    """``RunPython`` for code that uses the schema editor's connection only, never the historical
    models: its ``apps`` argument is None. ``RunPython`` renders every model of the state again
    for each run once an earlier operation changed a model in place (``AddField``, ``AlterField``:
    a "delayed" state), tens of milliseconds each on an empty database's ``migrate``; this one
    renders nothing."""

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        if router.allow_migrate(schema_editor.connection.alias, app_label, **self.hints):
            self.code(None, schema_editor)

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        if self.reverse_code is None:
            raise NotImplementedError("You cannot reverse this operation")
        if router.allow_migrate(schema_editor.connection.alias, app_label, **self.hints):
            self.reverse_code(None, schema_editor)
