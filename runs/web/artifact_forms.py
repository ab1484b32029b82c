"""Schema-driven editing of artifact data: a form from a JSON Schema, its parsing, plain-word errors.

    form = build_form(schema, data)            # FormField tree, or None: edit as JSON
    data, problems = parse_form(form, post, data)
    errors = schema_errors(schema, data)       # [{path, field, message}] in plain words
    attach_errors(form, errors)                # each error next to its field; the rest returned

What gets a widget: objects with properties (a group of fields, nested as deep as the schema
goes), strings, numbers, integers, booleans, enums, unions of those (``"type": ["string",
"number"]``: a type choice plus a value), arrays of scalars (one item per line) and arrays of
objects with properties (a group per item, each with "Remove this item", and one blank group with
"Add this item": no JavaScript), at the root too. Anything else (``oneOf``, ``$ref`` ...) is a
small JSON box for that field only, with a note saying so. When the schema's root is neither an
object with properties nor a list of such objects, the whole artifact is edited as JSON and the
page says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import orjson
from jsonschema import Draft202012Validator

from runs.protocol.schemas import SchemaRegistry, default_registry

SCALAR_TYPES = ("string", "number", "integer", "boolean")
TYPE_WORDS = {
    "string": "text",
    "number": "a number",
    "integer": "a whole number",
    "boolean": "true or false",
    "null": "empty",
    "object": "an object",
    "array": "a list",
}
MAX_DEPTH = 6


@lru_cache(maxsize=1)
def schema_registry() -> SchemaRegistry:
    return default_registry()


# --- errors in plain words ---------------------------------------------------------------------


def _plain(err) -> str:
    v, val = err.validator, err.validator_value
    if v == "required":
        return "This field is required."
    if v == "type":
        types = val if isinstance(val, list) else [val]
        return "Enter " + " or ".join(TYPE_WORDS.get(str(t), str(t)) for t in types) + "."
    if v == "minLength":
        return "This field cannot be empty." if val == 1 else f"Enter at least {val} characters."
    if v == "maxLength":
        return f"Enter at most {val} characters."
    if v == "minimum":
        return f"Enter a value of at least {val}."
    if v == "maximum":
        return f"Enter a value of at most {val}."
    if v == "exclusiveMinimum":
        return f"Enter a value greater than {val}."
    if v == "exclusiveMaximum":
        return f"Enter a value less than {val}."
    if v == "enum":
        return "Choose one of: " + ", ".join(orjson.dumps(x).decode() for x in val) + "."
    if v == "const":
        return f"Must be {orjson.dumps(val).decode()}."
    if v == "minItems":
        return f"Add at least {val} item{'s' if val != 1 else ''}."
    if v == "maxItems":
        return f"Keep at most {val} items."
    if v == "uniqueItems":
        return "Items must not repeat."
    if v == "pattern":
        return f"Use the expected format (pattern {val})."
    if v == "format":
        return f"Enter a valid {val}."
    if v == "additionalProperties":
        extra = sorted(set(err.instance) - set((err.schema or {}).get("properties", {})))
        return "Not allowed here: " + ", ".join(extra) + "."
    return err.message


def schema_required_missing(err) -> list[str]:
    return [
        name
        for name in (err.validator_value or [])
        if isinstance(err.instance, dict) and name not in err.instance
    ]


def schema_errors(schema: dict | None, data: Any) -> list[dict[str, str]]:
    """All schema violations of ``data`` as {path, field, message}, in document order.

    ``path`` is a JSON pointer (a missing required property points at itself), ``field`` the
    top-level property, ``message`` a sentence for people.
    """
    if not schema:
        return []
    validator = Draft202012Validator(schema)
    out = []
    for err in sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path]):
        parts = list(err.absolute_path)
        if err.validator == "required" and isinstance(err.instance, dict):
            missing = [p for p in schema_required_missing(err) if p]
            parts = parts + missing[:1]
        out.append(
            {
                "path": "/" + "/".join(str(p) for p in parts),
                "field": str(parts[0]) if parts else "",
                "message": _plain(err),
            }
        )
        if len(out) >= 50:
            break
    return out


# --- the form ---------------------------------------------------------------------------------


@dataclass
class FormField:
    """One field of the form. ``pointer`` is its JSON pointer ("" for the root), also its input name."""

    pointer: str
    name: str
    label: str
    kind: str  # group | items | text | number | integer | boolean | enum | union | lines | json
    required: bool = False
    description: str = ""
    enum: list[Any] = field(default_factory=list)
    types: list[str] = field(default_factory=list)  # union: the scalar types it allows (and "null")
    item_type: str = "string"  # lines: the items' type
    children: list[FormField] = field(default_factory=list)
    value: Any = None
    present: bool = False
    text: str = ""
    chosen_type: str = ""
    errors: list[str] = field(default_factory=list)
    autofocus: bool = False
    item: str = ""  # a group that is one item of a list: "existing" (removable) or "new" (added on request)
    kept: list[int] = field(default_factory=list)  # items: the form index of each parsed item, in order
    id_prefix: str = ""  # several forms on one page (a gate panel's): each its own ids

    @property
    def input_id(self) -> str:
        return self.id_prefix + ("f" + "".join(c if c.isalnum() else "-" for c in self.pointer) or "f-root")

    @property
    def enum_options(self) -> list[tuple[int, str, bool]]:
        return [(i, _text(v), self.present and v == self.value) for i, v in enumerate(self.enum)]

    def walk(self):
        yield self
        for child in self.children:
            yield from child.walk()


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return orjson.dumps(value).decode()


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _types(prop: dict) -> list[str]:
    t = prop.get("type")
    if isinstance(t, str):
        return [t]
    if isinstance(t, list) and all(isinstance(x, str) for x in t):
        return list(t)
    return []


def _leaf(
    prop: Any, pointer: str, name: str, required: bool, value: Any, present: bool, depth: int
) -> FormField:
    label = (prop.get("title") if isinstance(prop, dict) else None) or name
    f = FormField(
        pointer=pointer,
        name=name,
        label=str(label),
        kind="json",
        required=required,
        description=str(prop.get("description", "")) if isinstance(prop, dict) else "",
        value=value,
        present=present,
    )
    if not isinstance(prop, dict):
        f.text = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() if present else ""
        return f
    _classify(f, prop, value, present, depth)
    f.text = _leaf_text(f, value, present)
    return f


def _is_scalar_lines(prop: dict, types: list[str]) -> bool:
    """An array of strings, numbers or integers: edited as one value per line."""
    items = prop.get("items")
    return (
        types == ["array"]
        and isinstance(items, dict)
        and _types(items) in (["string"], ["number"], ["integer"])
    )


def _classify(f: FormField, prop: dict, value: Any, present: bool, depth: int) -> None:
    """The field's kind (and what the kind needs) from its schema; "json" when nothing fits."""
    types = _types(prop)
    if isinstance(prop.get("enum"), list) and prop["enum"]:
        f.kind, f.enum = "enum", list(prop["enum"])
    elif types == ["object"] and isinstance(prop.get("properties"), dict) and depth < MAX_DEPTH:
        f.kind = "group"
        f.children = _children(prop, f.pointer, value if isinstance(value, dict) else {}, depth + 1)
    elif _object_items(prop) is not None and depth < MAX_DEPTH and (value is None or isinstance(value, list)):
        f.kind = "items"
        f.children = _items(prop, f.pointer, value, depth)
    elif len(types) == 1 and types[0] in SCALAR_TYPES:
        f.kind = types[0] if types[0] != "string" else "text"
    elif types and set(types) <= {*SCALAR_TYPES, "null"} and len(types) > 1:
        f.kind, f.types = "union", types
        vtype = _type_of(value) if present else ""
        if vtype == "integer" and "integer" not in types:
            vtype = "number"
        f.chosen_type = vtype if vtype in types else types[0]
    elif _is_scalar_lines(prop, types):
        f.kind, f.item_type = "lines", _types(prop["items"])[0]


def _leaf_text(f: FormField, value: Any, present: bool) -> str:
    """What the field's input shows for the stored value."""
    if f.kind == "lines":
        return "\n".join(_text(v) for v in value) if isinstance(value, list) else ""
    if f.kind == "json":
        return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() if present else ""
    if f.kind in ("group", "enum"):
        return f.text
    return _text(value) if present else ""


def _children(schema: dict, pointer: str, obj: dict, depth: int) -> list[FormField]:
    required = set(schema.get("required") or [])
    out = []
    for name, prop in schema["properties"].items():
        out.append(
            _leaf(
                prop, f"{pointer}/{_escape(name)}", name, name in required, obj.get(name), name in obj, depth
            )
        )
    return out


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "json"


def _object_items(prop: Any) -> dict | None:
    """The item schema of an array of objects with properties (a list the form can edit), else None."""
    if not isinstance(prop, dict) or _types(prop) != ["array"]:
        return None
    items = prop.get("items")
    if isinstance(items, dict) and "object" in _types(items) and isinstance(items.get("properties"), dict):
        return items if items["properties"] else None
    return None


def _item_label(item_schema: dict, value: Any, index: int) -> str:
    name = next(
        (
            value[k]
            for k in ("title", "name", "label", "id", "jobId")
            if isinstance(value, dict) and value.get(k)
        ),
        None,
    )
    noun = str(item_schema.get("title") or "Item")
    return f"{noun} {index + 1}" + (f": {_text(name)[:60]}" if name is not None else "")


def _items(prop: dict, pointer: str, value: Any, depth: int) -> list[FormField]:
    """One group per existing item (removable), then a blank one that is added on request."""
    item_schema = _object_items(prop) or {}
    values = value if isinstance(value, list) else []
    out = []
    for i, item in enumerate([*values, None]):
        group = FormField(
            pointer=f"{pointer}/{i}",
            name=str(i),
            label=_item_label(item_schema, item, i) if item is not None else "New item",
            kind="group",
            required=False,
            value=item,
            present=item is not None,
            item="existing" if item is not None else "new",
        )
        group.children = _children(
            item_schema, group.pointer, item if isinstance(item, dict) else {}, depth + 1
        )
        out.append(group)
    return out


def with_id_prefix(form: FormField, prefix: str) -> FormField:
    """The same form with every element id starting with ``prefix`` (names stay the pointers)."""
    for f in form.walk():
        f.id_prefix = prefix
    return form


def build_form(schema: dict | None, data: Any) -> FormField | None:
    """The form for ``schema`` filled with ``data``; None when the root is neither an object with
    properties nor a list of them."""
    if isinstance(schema, dict) and _object_items(schema) is not None:
        root = FormField(pointer="", name="", label="", kind="items", required=True, value=data, present=True)
        root.children = _items(schema, "", data, 1)
        return root
    if not isinstance(schema, dict) or "object" not in _types(schema):
        return None
    if not isinstance(schema.get("properties"), dict) or not schema["properties"]:
        return None
    root = FormField(pointer="", name="", label="", kind="group", required=True, value=data, present=True)
    root.children = _children(schema, "", data if isinstance(data, dict) else {}, 1)
    return root


# --- parsing a posted form ---------------------------------------------------------------------


def _coerce(ftype: str, raw: str) -> tuple[Any, str]:
    raw = raw.strip() if ftype != "string" else raw
    if ftype == "boolean":
        low = raw.strip().lower()
        if low in ("true", "on", "1", "yes"):
            return True, ""
        if low in ("false", "off", "0", "no"):
            return False, ""
        return raw, "Enter true or false."
    if ftype == "null":
        return None, ""
    if ftype == "integer":
        try:
            return int(raw), ""
        except ValueError:
            return raw, "Enter a whole number."
    if ftype == "number":
        try:
            value = float(raw)
        except ValueError:
            return raw, "Enter a number."
        if value != value or value in (float("inf"), float("-inf")):
            return raw, "Enter a finite number."
        return (int(value) if value.is_integer() and "." not in raw and "e" not in raw.lower() else value), ""
    return raw, ""


def coerce_form_value(ftype: str, raw: str) -> tuple[Any, str]:
    """One posted value as ``ftype`` ("" is None, booleans from a checkbox), or a plain-word problem."""
    if ftype == "boolean":
        return raw in ("on", "true", "1"), ""
    if raw == "":
        return None, ""
    return _coerce(ftype, raw)


def parse_form(form: FormField, post, original: Any) -> tuple[Any, list[dict[str, str]]]:
    """The data the posted form describes, merged over ``original`` (keys the schema does not list
    are kept), and the fields whose text could not be read (each {path, field, message})."""
    problems: list[dict[str, str]] = []
    if form.kind == "items":
        return _parse_items(form, post, original, problems), problems
    base = dict(original) if isinstance(original, dict) else {}
    return _parse_group(form, post, base, problems), problems


def _parse_items(f: FormField, post, current: Any, problems: list) -> list:
    """The list: existing items not marked for removal (each merged over its stored value), then
    the new item when "Add this item" is ticked."""
    stored = current if isinstance(current, list) else []
    out = []
    f.kept = []
    for group in f.children:
        if group.item == "existing" and post.get(f"{group.pointer}#remove") in ("on", "true", "1"):
            continue
        if group.item == "new" and post.get(f"{group.pointer}#add") not in ("on", "true", "1"):
            continue
        index = int(group.name)
        base = dict(stored[index]) if index < len(stored) and isinstance(stored[index], dict) else {}
        out.append(_parse_group(group, post, base, problems))
        f.kept.append(index)
    return out


def form_pointer(form: FormField, path: str) -> str:
    """The form's pointer for a JSON pointer into the parsed data: items removed from a list shift
    the data's indices, not the form's (call after :func:`parse_form`)."""
    fields = {f.pointer: f for f in form.walk()}
    out = ""
    for part in path.split("/")[1:]:
        container = fields.get(out)
        if container is not None and container.kind == "items" and part.isdigit():
            index = int(part)
            part = str(container.kept[index]) if index < len(container.kept) else part
        out += "/" + part
    return out or path


def form_schema_errors(form: FormField, schema: dict | None, data: Any) -> list[dict[str, str]]:
    """:func:`schema_errors` of the parsed data, each path the form's pointer (see :func:`form_pointer`)."""
    return [{**e, "path": form_pointer(form, e["path"])} for e in schema_errors(schema, data)]


def _parse_group(group: FormField, post, obj: dict, problems: list) -> dict:
    for f in group.children:
        present, value = _parse_field(f, post, obj.get(f.name), problems)
        if present:
            obj[f.name] = value
        else:
            obj.pop(f.name, None)
    return obj


def _left_blank(group: FormField, post) -> bool:
    """Nothing typed or chosen in any field of the group (an unticked checkbox counts as blank)."""
    for f in group.walk():
        if f.kind in ("group", "items", "boolean"):
            continue
        if post.get(f.pointer, "").strip():
            return False
    return True


def _problem(problems: list, f: FormField, message: str) -> None:
    top = f.pointer.split("/")[1] if f.pointer else ""
    problems.append({"path": f.pointer or "/", "field": top, "message": message})


def _parse_items_field(f: FormField, post, current: Any, problems: list) -> tuple[bool, Any]:
    items = _parse_items(f, post, current, problems)
    return bool(items) or f.required or isinstance(current, list), items


def _parse_group_field(f: FormField, post, current: Any, problems: list) -> tuple[bool, Any]:
    if current is None and not f.required and _left_blank(f, post):
        return False, None  # an optional object that was absent and got no value stays absent
    obj = dict(current) if isinstance(current, dict) else {}
    obj = _parse_group(f, post, obj, problems)
    return bool(obj) or f.required or isinstance(current, dict), obj


def _parse_boolean(f: FormField, post, current: Any, problems: list) -> tuple[bool, Any]:
    value = post.get(f.pointer) in ("on", "true", "1")
    # an unticked box of an optional field the data did not have stays absent (no spurious false)
    return (value or f.required or current is not None), value


def _parse_enum(f: FormField, post, current: Any, problems: list) -> tuple[bool, Any]:
    raw = post.get(f.pointer, "")
    if raw == "":
        return False, None
    try:
        return True, f.enum[int(raw)]
    except (ValueError, IndexError):
        _problem(problems, f, "Choose one of the listed values.")
        return False, None


def _parse_lines(f: FormField, post, current: Any, problems: list) -> tuple[bool, Any]:
    items = [line.strip() for line in post.get(f.pointer, "").splitlines() if line.strip()]
    if not items and not f.required and current is None:
        return False, None
    values = []
    for item in items:
        value, problem = _coerce(f.item_type, item)
        if problem:
            _problem(problems, f, f"“{item}”: {problem}")
        values.append(value)
    return True, values


def _parse_json(f: FormField, post, current: Any, problems: list) -> tuple[bool, Any]:
    raw = post.get(f.pointer, "")
    if raw.strip() == "":
        return False, None
    try:
        return True, orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        _problem(problems, f, f"Not valid JSON: {exc}")
        return False, None


def _parse_union(f: FormField, post, current: Any, problems: list) -> tuple[bool, Any]:
    raw = post.get(f.pointer, "")
    chosen = post.get(f"{f.pointer}#type", f.types[0])
    if chosen not in f.types:
        _problem(problems, f, "Choose a type.")
        return False, None
    if chosen == "null":
        return True, None
    if raw == "" and chosen != "string":
        return (False, None) if not f.required else (True, raw)
    value, problem = _coerce(chosen, raw)
    if problem:
        _problem(problems, f, problem)
    return True, value


def _parse_scalar(f: FormField, post, current: Any, problems: list) -> tuple[bool, Any]:
    """text, number, integer"""
    raw = post.get(f.pointer, "")
    if raw == "" and not (f.kind == "text" and (f.required or current is not None)):
        return False, None
    value, problem = _coerce("string" if f.kind == "text" else f.kind, raw)
    if problem:
        _problem(problems, f, problem)
    return True, value


_PARSERS = {
    "items": _parse_items_field,
    "group": _parse_group_field,
    "boolean": _parse_boolean,
    "enum": _parse_enum,
    "lines": _parse_lines,
    "json": _parse_json,
    "union": _parse_union,
}


def _parse_field(f: FormField, post, current: Any, problems: list) -> tuple[bool, Any]:
    """(present, value) of one field from the post; a field left empty and optional is absent."""
    return _PARSERS.get(f.kind, _parse_scalar)(f, post, current, problems)


def fill_from_post(form: FormField, post) -> None:
    """Show what the user typed (not the stored data) after a failed save."""
    for f in form.walk():
        if f.item == "existing":
            f.present = post.get(f"{f.pointer}#remove") not in ("on", "true", "1")
        elif f.item == "new":
            f.present = post.get(f"{f.pointer}#add") in ("on", "true", "1")
        if f.kind in ("group", "items") or not f.pointer:
            continue
        if f.kind == "boolean":
            f.value, f.present = post.get(f.pointer) in ("on", "true", "1"), True
        elif f.kind == "enum":
            try:
                f.value, f.present = f.enum[int(post.get(f.pointer, ""))], True
            except (ValueError, IndexError):
                f.present = False
        else:
            f.text = post.get(f.pointer, "")
            if f.kind == "union":
                f.chosen_type = post.get(f"{f.pointer}#type", f.chosen_type)


def attach_errors(form: FormField, errors: list[dict[str, str]]) -> list[dict[str, str]]:
    """Put each error on the deepest field its path falls in; return the ones no field takes.
    The first field with an error gets ``autofocus``."""
    fields = {f.pointer: f for f in form.walk() if f.pointer}
    rest = []
    for err in errors:
        path = err.get("path", "")
        target = None
        probe = path
        while probe:
            if probe in fields:
                target = fields[probe]
                break
            probe = probe.rsplit("/", 1)[0]
        if target is None:
            rest.append(err)
        else:
            sub = path[len(target.pointer) :]
            target.errors.append(f"{sub.lstrip('/')}: {err['message']}" if sub else err["message"])
    first = next((f for f in form.walk() if f.errors and f.kind not in ("group", "items")), None)
    if first is None:
        first = next((f for f in form.walk() if f.errors), None)
    if first is not None:
        first.autofocus = True
    return rest
