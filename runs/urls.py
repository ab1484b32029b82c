"""Pages. `/runs/demo` (and its fragments) is public and read-only; everything else needs sign-in."""

from django.urls import path
from django.views.generic import RedirectView

from runs import views

app_name = "runs"

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="runs:list", permanent=False), name="home"),
    path("runs/", views.run_list, name="list"),
    path("runs/inbox/", views.review_inbox, name="inbox"),
    path("ledger/", views.workspace_ledger, name="ledger"),
    path("import/", views.import_bundle, name="import"),
    path("members/", views.members, name="members"),
    path("workspace/switch/", views.switch_workspace_view, name="switch_workspace"),
    path("runs/demo", views.run_detail, {"run_id": "demo"}, name="demo"),
    path("runs/<str:run_id>/", views.run_detail, name="detail"),
    path("runs/<str:run_id>/timeline/", views.timeline, name="timeline"),
    path("runs/<str:run_id>/events/<int:seq>/", views.event_state, name="event_state"),
    path("runs/<str:run_id>/graph/", views.graph, name="graph"),
    path("runs/<str:run_id>/status/", views.status_fragment, name="status"),
    path("runs/<str:run_id>/gates/", views.gate_panel, name="gates"),
    path("runs/<str:run_id>/gates/resolve/", views.resolve_gate, name="resolve_gate"),
    path("runs/<str:run_id>/artifacts/", views.artifact_editor, name="artifacts"),
    path("runs/<str:run_id>/artifacts/diff/", views.artifact_diff, name="artifact_diff"),
    path("runs/<str:run_id>/rules/", views.rules, name="rules"),
    path("runs/<str:run_id>/ledger/", views.run_ledger, name="run_ledger"),
    path("runs/<str:run_id>/export/", views.export_bundle, name="export"),
    path("runs/<str:run_id>/cancel/", views.cancel_run, name="cancel"),
]
