"""Websocket routes (filled by the live-status consumers)."""

websocket_urlpatterns: list = []
