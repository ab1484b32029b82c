from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "evals"
    verbose_name = "Datasets and experiments"

    def ready(self) -> None:
        # AppConfig.ready: where an app registers what it provides (Django's convention). The MCP
        # server imports evals.mcp when it is built; runs never imports evals.
        from evals.selectors import failed_experiment_concern
        from runs.actions.prompts import register_promotion_check
        from runs.mcp import register_tool_module

        register_tool_module("evals.mcp")
        # a promotion whose experiment failed on every item is not approved in one click
        register_promotion_check(failed_experiment_concern)

        from runs.background.periodic import register  # AppConfig.ready, as above

        # experiments whose task row is gone end failed with the reason (`manage.py worker`)
        register("experiments", "evals.runner.recover_experiments", 30)
