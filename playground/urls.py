"""Playground pages, mounted at /playground/.

``/playground/?from_event=<run_id>:<seq>`` opens the model call recorded at that sequence number
(a model_io request or response event) with its exact request restored.
"""

from django.urls import path

from playground import views

app_name = "playground"

urlpatterns = [
    path("", views.playground, name="page"),
    path("preview/", views.preview, name="preview"),
    path("send/", views.send, name="send"),
    path("prompts/", views.save_prompt, name="save_prompt"),
    path("settings/", views.settings_page, name="settings"),
    path("executions/<uuid:execution_id>/", views.execution_detail, name="execution"),
    path("executions/<uuid:execution_id>/message/", views.execution_message, name="execution_message"),
    path("executions/<uuid:execution_id>/cancel/", views.execution_cancel, name="execution_cancel"),
    path("executions/<uuid:execution_id>/retry/", views.execution_retry, name="execution_retry"),
]
