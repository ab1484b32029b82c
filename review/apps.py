from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "review"
    verbose_name = "Annotation queues"

    def ready(self) -> None:
        # Its REST routes join the one API in workbench/urls.py (not here: `manage.py help` and
        # migrate must not load the API stack); runs never imports review.
        from runs.mcp import register_tool_module

        register_tool_module("review.mcp")  # the MCP server imports it when it is built

        from review.listeners import add_by_rules
        from runs.actions.notify import register_listener

        register_listener(add_by_rules)  # rules add runs to queues after each commit
