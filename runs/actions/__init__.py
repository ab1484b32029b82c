"""THE write path: every state change ends in a ``do_*`` function of this package.

One module per concept (Zulip's ``zerver/actions/``): ``core`` (the appender, the row lock, the
projection; only this package imports it), ``runs`` (start, commands, titles, fork, cancel,
delete), ``bundles`` (import), ``forks`` (replay and branch), ``runstore``, ``workspaces``,
``responsecache``, ``rollups`` (the ledger's sums, kept on the write path), ``permissions`` (the one table of rights) and ``notify`` (listeners told after
commit). Adapters (pages, REST, MCP, CLI, playground) may import the vocabulary below from here.
"""

from runs.actions.bundles import do_import_bundle
from runs.actions.core import ActionError, AppendResult
from runs.actions.rollups import rebuild as rebuild_rollups
from runs.actions.rollups import rollups_match
from runs.actions.runs import (
    CancelReport,
    do_append_events,
    do_cancel_tree,
    do_command,
    do_commands,
    do_delete_run,
    do_fork_from_state,
    do_set_run_title,
    do_start_run,
    projection_matches_fold,
    rebuild_projection,
)

__all__ = [
    "ActionError",
    "AppendResult",
    "CancelReport",
    "do_append_events",
    "do_cancel_tree",
    "do_command",
    "do_commands",
    "do_delete_run",
    "do_fork_from_state",
    "do_import_bundle",
    "do_set_run_title",
    "do_start_run",
    "projection_matches_fold",
    "rebuild_projection",
    "rebuild_rollups",
    "rollups_match",
]
