"""Websocket routes: live run pages and live workspace lists (see runs/live/consumers.py)."""

from django.urls import path, re_path

from playground.consumers import ExecutionConsumer
from runs.live.consumers import RunLiveConsumer, WorkspaceLiveConsumer

websocket_urlpatterns: list = [
    path("ws/workspace/", WorkspaceLiveConsumer.as_asgi()),
    re_path(r"^ws/playground/executions/(?P<execution_id>[0-9a-f-]{36})/$", ExecutionConsumer.as_asgi()),
    re_path(r"^ws/runs/(?P<run_id>.+)/$", RunLiveConsumer.as_asgi()),
]
