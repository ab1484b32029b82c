from django.apps import AppConfig
from django.db.backends.signals import connection_created
from django.db.models.signals import post_migrate

from runs.fields import register_search_text


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Runs"

    def ready(self) -> None:
        # AppConfig.ready: the models exist only now, so the listeners are imported here.
        from runs.actions.notify import register_durable_sink, register_fork_executor, register_listener
        from runs.live.publisher import on_run_change
        from runs.telemetry.transcript_log import record_change, record_changes

        connection_created.connect(register_search_text)  # SQLite: the search's wb_search_text

        register_durable_sink(
            record_change, batch=record_changes
        )  # transcripts: committed events -> JSONL files, first
        register_listener(on_run_change)  # live status: committed changes -> websocket groups
        register_fork_executor(_dispatch_fork)  # pending forks -> the replay executor
        register_listener(_resume_forks)  # a decision on a fork waiting at its gate resumes it

        from runs.actions.notify import register_delivery_scheduler  # AppConfig.ready, as above

        register_delivery_scheduler(_schedule_deliveries)  # outbox rows -> the notification task

        from runs.live.publisher import connect_access_signals

        connect_access_signals()  # membership / user changes -> open sockets re-check access

        from runs.actions.partitions import after_migrate  # PostgreSQL: the event table's ranges
        from runs.background.periodic import register  # periodic work, run by `manage.py worker`

        post_migrate.connect(after_migrate, sender=self)

        register("outbox", "runs.background.jobs.look_at_outbox", 30)
        register("otlp-quiet", "runs.background.jobs.end_quiet_traces", "runs.telemetry.otlp_sweep.interval")
        register("import-jobs", "runs.background.jobs.recover_jobs", 30)
        register("retention", "runs.background.jobs.retention", 3600)
        register("event-partitions", "runs.actions.partitions.maintain", 3600)  # PostgreSQL only
        register(
            "gate-escalation",
            "runs.background.escalation.escalate_gates",
            "runs.background.escalation.interval",
        )
        register("monitors", "runs.background.jobs.monitors", "runs.actions.monitors.interval")

        from django.conf import settings

        from runs.engine import programs  # here: settings are read at ready time, not import time

        for name in getattr(settings, "WORKBENCH_PROGRAM_MODULES", ()):
            programs.register_module(name)  # imported on the first lookup, not at start-up

        if getattr(settings, "WORKBENCH_OTEL_ENDPOINT", ""):
            from runs.telemetry.otel_stream import start_from_settings

            start_from_settings()  # finished runs -> OTLP collector, off the write path


def _dispatch_fork(fork_pk: int) -> None:
    # Deferred: the executor pulls in the providers and the programs' code; `manage.py help` and
    # every other start-up must not pay for it (tests/ops/test_startup).
    from runs.execution.replay import dispatch

    dispatch(fork_pk)


def _resume_forks(change) -> None:
    if not change.may_hold_decision():
        return  # the common case decided here, without importing the executor
    # Deferred: start-up cost, as above.
    from runs.execution.replay import resume_waiting_forks

    resume_waiting_forks(change)


def _schedule_deliveries(run_after=None) -> None:
    # Deferred: the sender pulls in httpx2, the egress guard and standardwebhooks; start-up of
    # every command must not pay for it (tests/ops/test_startup).
    from runs.notifications.tasks import schedule

    schedule(run_after)
