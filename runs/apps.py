from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Runs"

    def ready(self) -> None:
        from runs.live import on_run_change
        from runs.notify import register_durable_sink, register_listener
        from runs.transcript_log import record_change

        register_durable_sink(record_change)  # transcripts: committed events -> JSONL files, first
        register_listener(on_run_change)  # live status: committed changes -> websocket groups

        from runs.live import connect_access_signals

        connect_access_signals()  # membership / user changes -> open sockets re-check access

        from django.conf import settings

        if getattr(settings, "WORKBENCH_OTEL_ENDPOINT", ""):
            from runs.otel_stream import start_from_settings

            start_from_settings()  # finished runs -> OTLP collector, off the write path
