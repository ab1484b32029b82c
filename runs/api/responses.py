"""Small response builders shared by the routers."""

from __future__ import annotations

from django.http import HttpRequest

from runs.actions import AppendResult
from runs.actions.permissions import Action
from runs.api.auth import principal
from runs.api.errors import ApiError
from runs.models import Run
from runs.selectors.runs import RunNotFound, get_run, is_judge_call


def etag_for(run: Run) -> str:
    return f'"{run.revision}"'


def write_result(run: Run, seqs: list[int], *, created: bool = False) -> dict:
    return {
        "runId": run.run_id,
        "revision": run.revision,
        "status": run.status,
        "lastSeq": run.last_seq,
        "seqs": seqs,
        "created": created,
    }


def append_result(result: AppendResult) -> dict:
    return write_result(result.run, result.seqs)


def require(request: HttpRequest, action: Action):
    """The caller's principal, after asking the permission table (runs.actions.permissions) whether it
    may do ``action`` (403 otherwise)."""
    if not isinstance(action, Action):
        raise TypeError(
            f"require() takes a runs.actions.permissions.Action (the one permission table), not {action!r}"
        )
    caller = principal(request)
    caller.require_action(action)
    return caller


def readable_run(caller, run_id: str) -> Run:
    """The caller's workspace's run ``run_id`` (404 UNKNOWN_RUN otherwise). A gate judge's own call
    is as missing as a missing run to a caller who may not manage judges: its answer is a proposal
    for a gate people may still be deciding (docs/users/judges.md)."""
    run = get_run(caller.workspace, run_id)
    if is_judge_call(run) and not caller.may(Action.MANAGE_JUDGES):
        raise RunNotFound(run_id)
    return run


def parse_if_match(value: str | None) -> frozenset[int] | str | None:
    """``If-Match`` as the set of revisions it names, ``"*"``, or None when absent. Malformed -> 400."""
    if value is None:
        return None
    value = value.strip()
    if value == "*":
        return "*"
    candidates = []
    for part in value.split(","):
        part = part.strip()
        if part.startswith("W/"):
            part = part[2:]
        part = part.strip('"')
        if not part.isdigit():
            raise ApiError(
                "INVALID_INPUT", f"If-Match must carry a revision ETag such as '\"3\"', not {value!r}"
            )
        candidates.append(int(part))
    return frozenset(candidates)
