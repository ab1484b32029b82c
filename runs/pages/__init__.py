"""Workbench pages: one module per page or area, each a thin adapter.

A page parses its input, calls a selector (``runs.selectors.runs``) or an action (``runs.actions``),
and renders. Partials that live updates also render get their context from ``runs.web.partials``;
who may see or change a run is decided in ``runs.pages.access``.

    run_list    runs list, workspace switcher       inbox      pending gates of the workspace
    detail      run page, timeline, state diff      gates      resolving a gate
    artifacts   artifact editor and diff            rules      rule sets
    ledger      run and workspace ledgers           imports    bundle upload and import
    members     workspace members (owners)              compare    two runs side by side
"""
