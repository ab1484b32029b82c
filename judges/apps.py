from django.apps import AppConfig
from django.utils.module_loading import import_string


class JudgesConfig(AppConfig):
    name = "judges"
    verbose_name = "Gate judges"

    def ready(self) -> None:
        # A gate request or decision queues the judges' task. Both modules import models, so they
        # are loaded by name once the app registry is ready (Django's late binding, as settings do).
        register_listener = import_string("runs.actions.notify.register_listener")
        register_listener(import_string("judges.listeners.queue_judges"))
