from django.apps import AppConfig

from runs.engine import programs


class PlaygroundConfig(AppConfig):
    name = "playground"

    def ready(self) -> None:
        # AppConfig.ready: where an app registers what it provides (Django's convention).
        # Playground runs' step code for replays, imported when a replay first looks for it.
        programs.register_module("playground.step_code")

        # AppConfig.ready: the models exist only now (playground.prices reads ModelEntry).
        from playground.prices import price_rows
        from runs.selectors.prices import register_price_reader

        register_price_reader(price_rows)  # the workspace's own model prices override genai-prices
