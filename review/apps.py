from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "review"
    verbose_name = "Annotation queues"

    def ready(self) -> None:
        # AppConfig.ready: where an app registers what it provides (Django's convention); its
        # modules need the app registry, so they are imported here, not at the top. Its REST
        # routes join the one API in workbench/urls.py; runs never imports review.
        from review.registrations import register_all

        register_all()
