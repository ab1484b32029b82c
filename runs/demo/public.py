"""The public demo: a read-only snapshot of the demo run, and the nightly batch import.

Choice: a snapshot rather than a copy per visitor. The run shown at `/runs/demo` is an exported
and re-imported bundle of the demo run, stored in workspace ``public-demo``, which has no members
and no API tokens: every write path (pages, REST, MCP, websockets) first resolves the caller's
membership or token in the run's workspace, so nothing can resolve its gate and every visitor sees
it pending. A copy per visitor would need a run per anonymous session (rows that grow with
traffic and a clean-up job) for the same page; visitors who want to press Approve sign in and do
it on the original in workspace ``demo``.
"""

from __future__ import annotations

from runs import actions
from runs.actions.signing import do_export_bundle
from runs.actions.workspaces import get_or_create_workspace
from runs.models import Run, Workspace
from runs.selectors.runs import find_run
from runs.web.request import DEMO_WORKSPACE


def publish_snapshot(source: Run) -> Run:
    """The read-only public copy of ``source`` (made once: a later call returns the existing one)."""
    public = get_or_create_workspace(DEMO_WORKSPACE, name="Public demo")
    existing = find_run(public, source.run_id)
    if existing is not None:
        return existing
    # Signed like every export: the public page shows who signed, exported and approved it.
    data = do_export_bundle(source, exported_by="cli:demo_data").data
    return actions.do_import_bundle(workspace=public, data=data, actor="demo_data")


def import_batch(workspace: Workspace) -> Run:
    """The nightly batch run (10k+ events) in ``workspace``, imported once as a bundle."""
    # Deferred: building the 10k-event batch module's data is costly and only demo_data needs it.
    from runs.demo.batch_run import BATCH_RUN_ID, batch_bundle

    existing = find_run(workspace, BATCH_RUN_ID)
    if existing is not None:
        return existing
    return actions.do_import_bundle(workspace=workspace, data=batch_bundle(), actor="demo_data")
