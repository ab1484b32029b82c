"""In-process API for host applications running inside the Workbench Django process.

    from runs.session import Workbench

    wb = Workbench(workspace="demo", actor="pipeline:jobs")
    session = wb.start_run(workflow=JOB_SEARCH, subject={"userId": "u1"}, tags=["nightly"])
    session.begin_step("parse")
    session.log_model_io(direction="response", provider="anthropic", model="claude-haiku-4-5",
                         usage={"inputTokens": 120, "outputTokens": 40}, cost={"amount": 0.002, "currency": "USD"})
    session.write_artifact("profile", "job.profile", {...})
    session.complete_step("parse")

Every call goes through runs.actions (the one write path) and returns what it appended.
"""

from __future__ import annotations

from typing import Any

from runs import actions
from runs.engine import commands as cmd
from runs.models import Run, Workspace
from runs.workspaces import get_or_create_workspace


class Workbench:
    def __init__(self, *, workspace: Workspace | str, actor: str = "session") -> None:
        self.workspace = workspace if isinstance(workspace, Workspace) else get_or_create_workspace(workspace)
        self.actor = actor

    def start_run(self, *, workflow: dict, **kwargs: Any) -> RunSession:
        run = actions.do_start_run(workspace=self.workspace, workflow=workflow, actor=self.actor, **kwargs)
        return RunSession(self, run.run_id)

    def session(self, run_id: str) -> RunSession:
        return RunSession(self, run_id)

    def fork(self, run_id: str, *, mode: str | None = None, **kwargs: Any) -> RunSession:
        """Fork a run. With ``mode`` ("replay" or "branch", plus ``from_seq`` and ``overlay``) this
        is seed 002's fork (history < from_seq copied, re-executed by the worker when the
        workflow's step code is registered); without it, the lightweight branch of the latest
        state (artifacts and rules carried over)."""
        if mode is not None:
            from runs.actions_fork import do_fork_run

            fork = do_fork_run(
                workspace=self.workspace, source_run_id=run_id, mode=mode, actor=self.actor, **kwargs
            )
            return RunSession(self, fork.run.run_id)
        child = actions.do_fork(workspace=self.workspace, parent_run_id=run_id, actor=self.actor, **kwargs)
        return RunSession(self, child.run_id)

    def replay(self, run_id: str, *, from_seq: int = 0) -> RunSession:
        return self.fork(run_id, mode="replay", from_seq=from_seq)

    def branch(self, run_id: str, *, from_seq: int, overlay: dict | None = None) -> RunSession:
        return self.fork(run_id, mode="branch", from_seq=from_seq, overlay=overlay)

    def register_workflow(self, workflow: dict | str, program: Any) -> None:
        """Register step code for a workflow: ``program(session)`` drives one run of it through a
        ``runs.replay.ProgramSession``. The workbench then runs it (``run_workflow``) and
        re-executes its forks (replay and branch) itself."""
        from runs import programs

        programs.register(workflow if isinstance(workflow, str) else workflow["id"], program)

    def run_workflow(self, *, workflow: dict, **kwargs: Any) -> RunSession:
        """Start a run of a registered workflow and execute its step code to the end."""
        from runs.replay import run_program

        return run_program(self, workflow=workflow, **kwargs)

    def determinism(self, replay_run_id: str) -> dict:
        from runs.actions_fork import determinism_report
        from runs.selectors import get_fork

        return determinism_report(get_fork(self.workspace, replay_run_id))


class RunSession:
    """Commands against one run. Each method appends through the actions and returns the result."""

    def __init__(self, workbench: Workbench, run_id: str) -> None:
        self.workbench = workbench
        self.run_id = run_id

    @property
    def run(self) -> Run:
        return Run.objects.by_run_id(self.workbench.workspace, self.run_id).get()

    def execute(self, command: Any, *, actor: str | None = None) -> actions.AppendResult:
        return actions.do_command(
            workspace=self.workbench.workspace,
            run_id=self.run_id,
            command=command,
            actor=actor or self.workbench.actor,
        )

    def set_title(self, title: str) -> Run:
        """Name the run (``run.metadata["workbench.title"]``): what lists show to tell runs apart."""
        return actions.do_set_run_title(workspace=self.workbench.workspace, run_id=self.run_id, title=title)

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
        actor = fields.pop("actor", None)
        return self.execute(cmd.LogModelIO(**fields), actor=actor)

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

    def fail(self, reason: str | None = None, **kw: Any):
        return self.execute(cmd.FailRun(reason=reason), **kw)

    def cancel(self, reason: str | None = None, **kw: Any):
        return self.execute(cmd.CancelRun(reason=reason), **kw)
