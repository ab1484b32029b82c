from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "evals"
    verbose_name = "Datasets and experiments"

    def ready(self) -> None:
        # AppConfig.ready: where an app registers what it provides (Django's convention); its
        # modules need the app registry, so they are imported here, not at the top.
        from evals.registrations import register_all

        register_all()
