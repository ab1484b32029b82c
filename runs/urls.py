"""Pages. `/runs/demo` (and its fragments) is public and read-only; everything else needs sign-in."""

from django.urls import path
from django.views.generic import RedirectView

import runs.ids  # noqa: F401  (registers the runid converter)
from runs.pages import (
    annotations,
    artifacts,
    compare,
    dashboard,
    detail,
    fork,
    gatelinks,
    gates,
    goto,
    imports,
    inbox,
    ledger,
    members,
    prompts,
    rules,
    run_list,
    webhooks,
)

app_name = "runs"

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="runs:list", permanent=False), name="home"),
    path("runs/", run_list.run_list, name="list"),
    path("runs/inbox/", inbox.review_inbox, name="inbox"),
    path("runs/inbox/next/", inbox.next_gate, name="next_gate"),
    path("ledger/", ledger.workspace_ledger, name="ledger"),
    path("dashboard/", dashboard.dashboard, name="dashboard"),
    path("compare/", compare.compare_runs, name="compare"),
    path("import/", imports.import_bundle, name="import"),
    path("import/jobs/<str:job_id>/", imports.import_job, name="import_job"),
    path("members/", members.members, name="members"),
    path("settings/webhooks/", webhooks.webhooks, name="webhooks"),
    path("prompts/", prompts.prompt_list, name="prompts"),
    path("prompts/<path:prompt_name>/", prompts.prompt_detail, name="prompt_detail"),
    path("promotions/<int:promotion_id>/decide/", prompts.decide_promotion, name="decide_promotion"),
    path("settings/notifications/", webhooks.notifications, name="notifications"),
    # An e-mailed decision link: GET asks to confirm, POST decides (runs.pages.gatelinks).
    path("gate-links/<str:token>/", gatelinks.gate_link, name="gate_link"),
    path("goto/", goto.goto_runs, name="goto"),
    path("workspace/switch/", run_list.switch_workspace_view, name="switch_workspace"),
    path("runs/demo", detail.run_detail, {"run_id": "demo"}, name="demo"),
    path("runs/<runid:run_id>/", detail.run_detail, name="detail"),
    path("runs/<runid:run_id>/timeline/", detail.timeline, name="timeline"),
    path("runs/<runid:run_id>/events/<int:seq>/", detail.event_state, name="event_state"),
    path("runs/<runid:run_id>/events/<int:seq>/detail/", detail.event_detail, name="event_detail"),
    path("runs/<runid:run_id>/spans/", detail.spans, name="spans"),
    path("runs/<runid:run_id>/spans/tree/", detail.span_tree, name="span_tree"),
    path("runs/<runid:run_id>/spans/<int:seq>/", detail.span_detail, name="span_detail"),
    path("runs/<runid:run_id>/graph/", detail.graph, name="graph"),
    path("runs/<runid:run_id>/status/", detail.status_fragment, name="status"),
    path("runs/<runid:run_id>/gates/", detail.gate_panel, name="gates"),
    path("runs/<runid:run_id>/gates/resolve/", gates.resolve_gate, name="resolve_gate"),
    path("runs/<runid:run_id>/artifacts/", artifacts.artifact_editor, name="artifacts"),
    path("runs/<runid:run_id>/artifacts/diff/", artifacts.artifact_diff, name="artifact_diff"),
    path("runs/<runid:run_id>/rules/", rules.rules, name="rules"),
    path("runs/<runid:run_id>/annotations/", annotations.annotations, name="annotations"),
    path("runs/<runid:run_id>/ledger/", ledger.run_ledger, name="run_ledger"),
    path("runs/<runid:run_id>/export/", detail.export_bundle, name="export"),
    path("runs/<runid:run_id>/cancel/", detail.cancel_run, name="cancel"),
    path("runs/<runid:run_id>/fork/", fork.fork_run, name="fork"),
    path("runs/<runid:run_id>/determinism/", fork.determinism, name="determinism"),
]
