from django.apps import AppConfig


class PlaygroundConfig(AppConfig):
    name = "playground"

    def ready(self) -> None:
        # AppConfig.ready: where an app registers what it provides (Django's convention).
        from runs.engine import programs

        # Playground runs' step code for replays, imported when a replay first looks for it.
        programs.register_module("playground.step_code")
