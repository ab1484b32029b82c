"""In-process API for host applications running inside the Workbench Django process.

    from runs.execution.host import Workbench

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
from runs.actions.forks import determinism_report, do_fork_with_history
from runs.actions.workspaces import get_or_create_workspace
from runs.engine import programs
from runs.execution.replay import run_program
from runs.execution.session import RunSession
from runs.models import Workspace
from runs.selectors.runs import get_fork


class Workbench:
    def __init__(self, *, workspace: Workspace | str, actor: str = "session") -> None:
        self.workspace = workspace if isinstance(workspace, Workspace) else get_or_create_workspace(workspace)
        self.actor = actor

    def start_run(self, *, workflow: dict, **kwargs: Any) -> RunSession:
        run = actions.do_start_run(workspace=self.workspace, workflow=workflow, actor=self.actor, **kwargs)
        return RunSession(self.workspace, self.actor, run.run_id)

    def session(self, run_id: str) -> RunSession:
        return RunSession(self.workspace, self.actor, run_id)

    def fork(self, run_id: str, *, mode: str | None = None, **kwargs: Any) -> RunSession:
        """Fork a run. With ``mode`` ("replay" or "branch", plus ``from_seq`` and ``overlay``) this
        is seed 002's fork (history < from_seq copied, re-executed by the worker when the
        workflow's step code is registered); without it, the lightweight branch of the latest
        state (artifacts and rules carried over)."""
        if mode is not None:
            fork = do_fork_with_history(
                workspace=self.workspace, source_run_id=run_id, mode=mode, actor=self.actor, **kwargs
            )
            return RunSession(self.workspace, self.actor, fork.run.run_id)
        child = actions.do_fork_from_state(
            workspace=self.workspace, parent_run_id=run_id, actor=self.actor, **kwargs
        )
        return RunSession(self.workspace, self.actor, child.run_id)

    def replay(self, run_id: str, *, from_seq: int = 0) -> RunSession:
        return self.fork(run_id, mode="replay", from_seq=from_seq)

    def branch(self, run_id: str, *, from_seq: int, overlay: dict | None = None) -> RunSession:
        return self.fork(run_id, mode="branch", from_seq=from_seq, overlay=overlay)

    def register_workflow(self, workflow: dict | str, program: Any) -> None:
        """Register step code for a workflow: ``program(session)`` drives one run of it through a
        ``runs.execution.replay.ProgramSession``. The workbench then runs it (``run_workflow``) and
        re-executes its forks (replay and branch) itself."""
        programs.register(workflow if isinstance(workflow, str) else workflow["id"], program)

    def run_workflow(self, *, workflow: dict, **kwargs: Any) -> RunSession:
        """Start a run of a registered workflow and execute its step code to the end."""
        return run_program(self, workflow=workflow, **kwargs)

    def determinism(self, replay_run_id: str) -> dict:
        return determinism_report(get_fork(self.workspace, replay_run_id))
