from django.apps import AppConfig


class WorkbenchConfig(AppConfig):
    """The project itself as an app: the ASGI `runserver` (workbench/management/commands) and the
    start-up choices of workbench.startup. No models."""

    name = "workbench"
    verbose_name = "Workbench"

    def ready(self) -> None:
        # AppConfig.ready: start-up choices read settings, final only now.
        from workbench import startup

        if not startup.url_checks:
            from django.core.checks import registry
            from django.core.checks import urls as url_checks

            for check in (
                url_checks.check_url_config,
                url_checks.check_url_namespaces_unique,
                url_checks.check_custom_error_handlers,
            ):
                registry.registry.registered_checks.discard(check)
