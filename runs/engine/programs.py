"""Step code the workbench can execute itself, by workflow id (what a fork's task runs).

A *program* is a callable ``program(session)`` that drives one run of its workflow through a
:class:`runs.execution.replay.ProgramSession` (the session API plus model calls through the provider
layer and gate decisions). Hosts register theirs through the host API
(``Workbench.register_workflow``); modules listed in ``WORKBENCH_PROGRAM_MODULES`` are imported
on the first lookup in every process (the server's, a task worker's) so that they register there.

A program may carry ``program.check_fork(*, workspace, source, mode, overlay)``: called before a
fork of its workflow is written, it raises ``runs.actions.ActionError`` to refuse one it could
not execute (an overlay it does not understand, data it needs that is gone).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

Program = Callable[[Any], Any]

_registry: dict[str, Program] = {}
# Modules apps name in their ready() (register_module; RunsConfig adds settings'
# WORKBENCH_PROGRAM_MODULES), imported on the first lookup: start-up needs none of their imports.

_modules: list[str] = []
_imported: set[str] = set()


def register(workflow_id: str, program: Program) -> None:
    if not isinstance(workflow_id, str) or not workflow_id:
        raise ValueError("a program needs the id of its workflow")
    if not callable(program):
        raise TypeError("a program must be callable: program(session)")
    _registry[workflow_id] = program


def unregister(workflow_id: str) -> None:
    _registry.pop(workflow_id, None)


def register_module(name: str) -> None:
    """Name a module whose import registers programs; it is imported on the first lookup."""
    if name not in _modules:
        _modules.append(name)


def load_configured() -> None:
    for name in list(_modules):
        if name not in _imported:
            _imported.add(name)
            importlib.import_module(name)


def get(workflow_id: str) -> Program | None:
    load_configured()
    return _registry.get(workflow_id)
