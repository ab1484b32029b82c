from django.apps import AppConfig


class PlaygroundConfig(AppConfig):
    name = "playground"

    def ready(self) -> None:
        import playground.replay  # noqa: F401  (registers playground runs' step code for replays)
