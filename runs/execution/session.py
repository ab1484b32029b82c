"""A run driven in process: every call goes through the actions (the one write path).

    session = RunSession(workspace, "pipeline:jobs", run_id)
    session.begin_step("parse")
    session.complete_step("parse")

Host code usually gets its sessions from ``runs.execution.host.Workbench``.
"""

from __future__ import annotations

from typing import Any

from runs import actions
from runs.engine import commands as cmd
from runs.models import Run, Workspace
from runs.selectors.prices import price_book
from runs.selectors.runs import runs_of


class RunSession:
    """Commands against one run. Each method appends through the actions and returns the result."""

    def __init__(self, workspace: Workspace, actor: str, run_id: str) -> None:
        self.workspace = workspace
        self.actor = actor
        self.run_id = run_id

    @property
    def run(self) -> Run:
        return runs_of(self.workspace).get(run_id=self.run_id)

    def execute(self, command: Any, *, actor: str | None = None) -> actions.AppendResult:
        return actions.do_command(
            workspace=self.workspace,
            run_id=self.run_id,
            command=command,
            actor=actor or self.actor,
        )

    def set_title(self, title: str) -> Run:
        """Name the run (``run.metadata["workbench.title"]``): what lists show to tell runs apart."""
        return actions.do_set_run_title(workspace=self.workspace, run_id=self.run_id, title=title)

    def begin_step(self, step_id: str, **kw: Any) -> actions.AppendResult:
        return self.execute(cmd.BeginStep(step_id=step_id), **kw)

    def complete_step(self, step_id: str, *, ok: bool = True, error: dict | None = None, **kw: Any):
        return self.execute(cmd.CompleteStep(step_id=step_id, ok=ok, error=error), **kw)

    def request_gate(
        self, step_id: str, gate: str, *, reason: str | None = None, checkpoint: str | None = None, **kw
    ):
        return self.execute(
            cmd.RequestGate(step_id=step_id, gate=gate, reason=reason, checkpoint=checkpoint), **kw
        )

    def resolve_gate(
        self,
        step_id: str,
        gate: str,
        decision: str,
        *,
        note: str | None = None,
        checkpoint: str | None = None,
        edit: Any = None,
        **kw: Any,
    ):
        return self.execute(
            cmd.ResolveGate(
                step_id=step_id, gate=gate, decision=decision, note=note, checkpoint=checkpoint, edit=edit
            ),
            **kw,
        )

    def write_artifact(self, key: str, type_id: str, data: Any, **options: Any):
        actor = options.pop("actor", None)
        return self.execute(cmd.WriteArtifact(key=key, type_id=type_id, data=data, **options), actor=actor)

    def patch_artifact(self, key: str, from_version: int, patch: list[dict], **options: Any):
        actor = options.pop("actor", None)
        return self.execute(
            cmd.PatchArtifact(key=key, from_version=from_version, patch=patch, **options), actor=actor
        )

    def log_model_io(self, **fields: Any):
        """A model call. A response with a usage and no cost is priced from the workspace's price
        book (its own prices, else genai-prices); the payload says which source priced it."""
        actor = fields.pop("actor", None)
        return self.execute(cmd.LogModelIO(**self.priced(fields)), actor=actor)

    def priced(self, fields: dict[str, Any]) -> dict[str, Any]:
        """``model_io`` fields with their cost when they are a response with a usage and no cost:
        priced from the workspace's price book (its own prices, else genai-prices, else the
        catalogue), ``payload["workbench.pricing"]`` saying which source. Others as they are."""
        if fields.get("direction") != "response" or not fields.get("usage") or fields.get("cost") is not None:
            return fields
        probe = {
            "type": "model_io",
            "direction": "response",
            "provider": fields.get("provider"),
            "model": fields.get("model"),
            "usage": fields["usage"],
            "payload": fields.get("payload"),
        }
        if price_book(self.workspace).price_event(probe) is None:
            return fields
        return {**fields, "cost": probe["cost"], "payload": probe["payload"]}

    def log_tool_call(self, name: str, **fields: Any):
        actor = fields.pop("actor", None)
        return self.execute(cmd.LogToolCall(name=name, **fields), actor=actor)

    def annotate(self, text: str, *, tags: list[str] | None = None, **kw: Any):
        return self.execute(cmd.Annotate(text=text, tags=tags), **kw)

    def record_error(self, message: str, *, code: str | None = None, fatal: bool = False, **kw: Any):
        return self.execute(cmd.RecordError(message=message, code=code, fatal=fatal), **kw)

    def start_span(self, span_id: str, name: str, **fields: Any):
        actor = fields.pop("actor", None)
        return self.execute(cmd.StartSpan(span_id=span_id, name=name, **fields), actor=actor)

    def end_span(self, span_id: str, **fields: Any):
        actor = fields.pop("actor", None)
        return self.execute(cmd.EndSpan(span_id=span_id, **fields), actor=actor)

    def set_gate_policy(self, step_id: str, policy: str, **kw: Any):
        return self.execute(cmd.SetGatePolicy(step_id=step_id, policy=policy), **kw)

    def change_rule_set(self, rule_set: dict, **kw: Any):
        return self.execute(cmd.ChangeRuleSet(rule_set=rule_set), **kw)

    def append_events(self, events: list[dict], **kw: Any):
        return self.execute(cmd.AppendEvents(events=tuple(events)), **kw)

    def complete(self, **kw: Any):
        return self.execute(cmd.CompleteRun(), **kw)

    def fail(self, reason: str, **kw: Any):  # the engine refuses a failure without a reason
        return self.execute(cmd.FailRun(reason=reason), **kw)

    def cancel(self, reason: str | None = None, **kw: Any):
        return self.execute(cmd.CancelRun(reason=reason), **kw)
