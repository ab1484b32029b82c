"""Playground pages, mounted at /playground/."""

app_name = "playground"

urlpatterns: list = []
