"""Prompts for pipelines: fetch a version by label (``production`` by default) or number, list the
workspace's prompts, save a new version, move a label (a protected one answers a promotion request).

    GET  /api/prompts/{prompt_name}?label=production      # or ?version=3; names may hold "/" (folders)
    GET  /api/prompts
    POST /api/prompts                               # {name, type?, body, config?, tags?, message?}
    POST /api/prompt-labels                         # {name, label, version, note?}

Reading needs ``read``; saving and moving labels ``write`` or ``review`` (runs.actions.permissions).
Another workspace's prompt answers 404 like a missing one.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Query, Router, Schema
from ninja.responses import Status
from pydantic import Field

from runs.actions.permissions import Action
from runs.actions.prompts import do_move_label, do_save_prompt_version
from runs.api.auth import principal
from runs.api.errors import ApiError
from runs.api.paging import NEXT_DOC, PageQuery, named
from runs.api.schemas import ErrorOut
from runs.protocol.canonical import parse_json
from runs.protocol.errors import ErrorCode
from runs.selectors.prompts import find_version, prompts_of, version_doc

router = Router(tags=["prompts"])
labels_router = Router(tags=["prompts"])

ERRORS = {
    400: ErrorOut,
    401: ErrorOut,
    403: ErrorOut,
    404: ErrorOut,
    409: ErrorOut,
    413: ErrorOut,
    429: ErrorOut,
}
SAVE_FIELDS = frozenset({"name", "type", "body", "config", "tags", "message"})
MOVE_FIELDS = frozenset({"name", "label", "version", "note", "experiment"})


class PromptVersionOut(Schema):
    name: str
    type: str = Field(description="text (body is a string) or chat (body is a list of {role, content}).")
    version: int
    labels: list[str] = Field(description="The labels pointing at this version (latest, production ...).")
    tags: list[str]
    body: Any = Field(description="The template; `{{variable}}` marks what compile() fills in.")
    config: dict[str, Any] = Field(description="The model and its parameters, versioned with the body.")
    variables: list[str]
    message: str
    created_by: str | None
    created_at: str


class PromptSummaryOut(Schema):
    name: str
    type: str
    tags: list[str]
    versions: int
    labels: dict[str, int] = Field(description="label -> version number.")


class LabelMoveOut(Schema):
    moved: bool = Field(description="True: the label moved. False: it is protected; a request waits.")
    label: str
    version: int
    promotion_request: int | None = Field(
        description="The promotion request waiting in the inbox when the label is protected."
    )


def _json_object(request: HttpRequest, fields: frozenset[str]) -> dict:
    data = parse_json(request.body) if request.body else None
    if not isinstance(data, dict):
        raise ApiError(ErrorCode.INVALID_INPUT, "the body must be a JSON object")
    unknown = set(data) - fields
    if unknown:
        raise ApiError(ErrorCode.INVALID_INPUT, f"unknown field(s): {', '.join(sorted(unknown))}")
    return data


@router.get(
    "",
    response={200: list[PromptSummaryOut], **ERRORS},
    summary="The workspace's prompts, by name",
    description=NEXT_DOC,
)
def list_prompts(request: HttpRequest, response: HttpResponse, page: Query[PageQuery]):
    caller = principal(request)
    caller.require_action(Action.VIEW_PROMPTS)
    return [
        {
            "name": p.name,
            "type": p.type,
            "tags": list(p.tags or []),
            "versions": p.version_count,
            "labels": {label.name: label.version.number for label in p.labels.all()},
        }
        for p in named(request, response, prompts_of(caller.workspace), page)
    ]


@router.post(
    "",
    response={201: PromptVersionOut, **ERRORS},
    summary="Save a new version of a prompt (created on its first save)",
    description="Body `{name, type?, body, config?, tags?, message?}`. Every save is a new immutable "
    "version; `latest` follows it. Needs the write or review scope.",
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": {"type": "object"}}}}
    },
)
def save_version(request: HttpRequest):
    caller = principal(request)
    caller.require_action(Action.SAVE_PROMPT)
    data = _json_object(request, SAVE_FIELDS)
    version = do_save_prompt_version(
        caller.workspace,
        name=data.get("name"),
        type=data.get("type"),
        body=data.get("body"),
        config=data.get("config"),
        tags=data.get("tags"),
        message=data.get("message") or "",
        scopes=caller.scopes,
        user=caller.user,
    )
    return Status(201, version_doc(version))


@router.get(
    "/{path:prompt_name}",
    response={200: PromptVersionOut, **ERRORS},
    summary="A prompt version by label (production when neither is given) or by number",
    description="`?label=production` (the default), `?label=staging`, `?version=3`. What pipelines "
    "fetch; the host SDK caches it (`wb.prompt(name, label=...)`).",
)
def get_prompt_version(
    request: HttpRequest, prompt_name: str, label: str | None = None, version: int | None = None
):
    caller = principal(request)
    caller.require_action(Action.VIEW_PROMPTS)
    if label is not None and version is not None:
        raise ApiError(ErrorCode.INVALID_INPUT, "give label or version, not both")
    if version is not None and not 0 < version < 2**31:
        raise ApiError(ErrorCode.INVALID_INPUT, "version is a positive integer")
    if label is not None and len(label) > 40:
        raise ApiError(ErrorCode.INVALID_INPUT, "label is 40 characters at most")
    name = prompt_name
    found = find_version(caller.workspace, name, label=label, version=version) if len(name) <= 200 else None
    if found is None:
        what = f"version {version}" if version is not None else f"label {label or 'production'}"
        raise ApiError("NOT_FOUND", f"no prompt {name!r} with {what}", 404)
    return version_doc(found)


@labels_router.post(
    "",
    response={200: LabelMoveOut, 202: LabelMoveOut, **ERRORS},
    summary="Move a label to a version (a protected label: ask for a promotion)",
    description="Body `{name, label, version, note?}`. An unprotected label moves at once (200); a "
    "protected one creates a promotion request a reviewer decides in the inbox (202). `latest` moves "
    "by itself. Needs the write or review scope; viewers never move labels.",
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": {"type": "object"}}}}
    },
)
def move_label(request: HttpRequest):
    caller = principal(request)
    caller.require_action(Action.MOVE_LABEL)
    data = _json_object(request, MOVE_FIELDS)
    move = do_move_label(
        caller.workspace,
        name=data.get("name"),
        label=data.get("label"),
        version=data.get("version"),
        note=data.get("note") or "",
        experiment_ref=data.get("experiment") or "",
        scopes=caller.scopes,
        user=caller.user,
    )
    if move.request is not None:
        req = move.request
        return Status(
            202,
            {
                "moved": False,
                "label": req.label,
                "version": req.to_version.number,
                "promotion_request": req.pk,
            },
        )
    assert move.label is not None
    return {
        "moved": True,
        "label": move.label.name,
        "version": move.label.version.number,
        "promotion_request": None,
    }
