"""“Approve with edits” at a gate: the artifact's schema form, prefilled, parsed and checked.

    edit = gate_edit(state, key, prefix="g1-")            # what a gate's edit shows
    edit = gate_edit(state, key, prefix="g1-", post=post)  # again, with what was typed and its errors
    data, errors = read_gate_edit(state, post)            # the posted form as data, problems in words

The form comes from the artifact's JSON Schema (``runs.web.artifact_forms``: strings, numbers,
booleans, enums, lists of these, nested objects; anything else is a small JSON box for that part).
An artifact without a schema, or whose schema's top level the form cannot show, is edited as JSON
(``edit_data``), and the edit says why. The same validator (``form_schema_errors``) answers the
check while the reviewer types (``runs:gate_edit``) and the decision itself (``runs:resolve_gate``),
and the decision records the change as a JSON Patch against the version the form started from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from runs.engine.state import RunState, gate_payload_key
from runs.web.artifact_forms import (
    FormField,
    attach_errors,
    build_form,
    fill_from_post,
    form_schema_errors,
    parse_form,
    schema_registry,
    with_id_prefix,
)

FORM = "form"  # the posted ``edit_editor`` of a schema form (else the JSON box's ``edit_data``)


@dataclass
class GateEdit:
    """What one gate's edit shows: the artifact (``key``, its ``version`` and ``type_id``), its
    ``form`` (None: edited as JSON, ``note`` says why), the JSON ``text``, and the ``errors`` no
    field of the form takes (or the JSON box's)."""

    key: str
    type_id: str = ""
    version: int = 0
    form: FormField | None = None
    note: str = ""
    text: str = ""
    errors: list[str] = field(default_factory=list)

    @property
    def field_errors(self) -> int:
        return sum(len(f.errors) for f in self.form.walk()) if self.form is not None else 0


def default_edit_key(state: RunState, gate: dict[str, Any]) -> str:
    """The artifact a gate's edit starts on: what the gate asks about (its payload), else the
    artifact written last; "" when the run has none."""
    payload = gate_payload_key(gate["stepId"], gate["gate"], gate.get("checkpoint"))
    if payload in state.artifacts:
        return payload
    return next(reversed(state.artifacts), "") if state.artifacts else ""


def _json_text(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def gate_edit(state: RunState, key: str, *, prefix: str, post: Any = None) -> GateEdit | None:
    """The edit of artifact ``key`` (None: no such artifact). With ``post`` (a refused or checked
    form of this very artifact) the fields show what was typed, each with its problems."""
    artifact = state.artifacts.get(key)
    if artifact is None:
        return None
    data = artifact.get("data")
    schema = schema_registry().get(artifact.get("typeId", ""))
    form = build_form(schema, data) if "data" in artifact else None
    edit = GateEdit(
        key=key,
        type_id=artifact.get("typeId", ""),
        version=int(artifact.get("version") or 0),
        text=_json_text(data),
    )
    if form is None:
        edit.note = (
            f"No schema is registered for {edit.type_id}, so it is edited as JSON."
            if schema is None
            else "Its schema's top level is not a set of named fields, so it is edited as JSON."
        )
        return edit
    edit.form = with_id_prefix(form, prefix)
    if post is not None and posted_for(post, key, edit.version):
        _, errors = _parse(form, schema, post, data)
        fill_from_post(form, post)
        edit.errors = [
            f"{e['path'].lstrip('/') or 'The data'}: {e['message']}" for e in attach_errors(form, errors)
        ]
    return edit


def posted_for(post: Any, key: str, version: int) -> bool:
    """Whether the posted form is the schema form of ``key`` at ``version`` (not the one of another
    artifact the reviewer has just switched from, nor of an older version)."""
    return (
        post.get("edit_editor") == FORM
        and post.get("edit_form_key") == key
        and post.get("edit_key") == key
        and post.get("edit_from_version") == str(version)
    )


def _parse(form: FormField, schema: Any, post: Any, data: Any) -> tuple[Any, list[dict[str, str]]]:
    """The posted form as data, and every problem at once: what could not be read, then what the
    schema says of the rest (as the artifact editor does)."""
    parsed, errors = parse_form(form, post, data)
    unreadable = {e["path"] for e in errors}
    errors += [e for e in form_schema_errors(form, schema, parsed) if e["path"] not in unreadable]
    return parsed, errors


def read_gate_edit(state: RunState, post: Any) -> tuple[Any, list[dict[str, str]]]:
    """The data a posted schema form describes and its problems ({path, field, message}); the
    form is rebuilt from the artifact's current version (the fields the post may carry)."""
    key = post.get("edit_key", "")
    artifact = state.artifacts.get(key)
    if artifact is None:
        return None, [{"path": "/", "field": "", "message": f"There is no artifact “{key}” in this run."}]
    schema = schema_registry().get(artifact.get("typeId", ""))
    form = build_form(schema, artifact.get("data")) if "data" in artifact else None
    if form is None:
        return None, [{"path": "/", "field": "", "message": f"{key} has no form; edit it as JSON."}]
    return _parse(form, schema, post, artifact.get("data"))


def problems_in_words(errors: list[dict[str, str]]) -> str:
    """One sentence for the top of the gate: how many problems, and the first of them."""
    first = errors[0]
    where = first["path"].lstrip("/") or "The data"
    more = f" ({len(errors)} problems; each is shown next to its field)" if len(errors) > 1 else ""
    return f"The edit was not recorded: {where}: {first['message']}{more}"
