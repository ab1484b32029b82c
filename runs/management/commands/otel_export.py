"""`manage.py otel_export RUN_ID --endpoint URL`: ship a run's trace as OTLP spans (OpenTelemetry SDK)."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.protocol.redaction import POLICIES, redacted_view
from runs.providers import egress
from runs.selectors.runs import (
    AmbiguousRunId,
    RunNotFound,
    dangerously_find_run_any_workspace,
    iter_event_bodies,
)
from runs.telemetry.otel_export import OtlpExportError, export_run_to_otlp


class Command(BaseCommand):
    help = "Export a run's trace to an OTLP/HTTP collector (spans per the protocol's OTel mapping)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id")
        parser.add_argument("--workspace", help="workspace slug (needed when several workspaces use the id)")
        parser.add_argument(
            "--endpoint", required=True, help="collector base URL, e.g. http://127.0.0.1:4318"
        )
        parser.add_argument(
            "--header", action="append", default=[], help="extra header NAME=VALUE (repeatable)"
        )
        parser.add_argument("--timeout", type=float, default=10.0)
        parser.add_argument(
            "--semconv",
            choices=("reference", "current"),
            default="reference",
            help="span attributes: the reference's mapping (default) or GenAI semantic conventions 1.42",
        )
        parser.add_argument(
            "--redact",
            choices=POLICIES,
            help="send the spans of the run's redacted user bundle of this policy (a run that carries "
            "a redaction policy, an imported redacted bundle, is always sent redacted by it)",
        )

    def handle(self, *args, **options) -> None:
        try:  # operator tool: every workspace
            run = dangerously_find_run_any_workspace(options["run_id"], options["workspace"])
        except RunNotFound:
            raise CommandError(f"UNKNOWN_RUN: no run {options['run_id']!r}") from None
        except AmbiguousRunId as exc:
            raise CommandError(f"{exc.code}: {exc}") from None
        headers = {}
        for item in options["header"]:
            name, sep, value = item.partition("=")
            if not sep or not name:
                raise CommandError(f"INVALID_INPUT: --header wants NAME=VALUE, got {item!r}")
            headers[name] = value
        doc, events = redacted_view(run.run_doc, iter_event_bodies(run), options.get("redact"))
        try:
            count = export_run_to_otlp(
                doc,
                list(events),
                endpoint=options["endpoint"],
                headers=headers or None,
                timeout=options["timeout"],
                semconv=options["semconv"],
                # The operator types the endpoint here: the operator's allowance (setting
                # WORKBENCH_EGRESS_ALLOW; loopback too in the embedded profile).
                egress_allow=egress.settings_allowance(settings, operator=True),
            )
        except OtlpExportError as exc:
            raise CommandError(f"{exc.code}: {exc}") from exc
        self.stdout.write(f"{run.run_id}: exported {count} spans to {options['endpoint']}")
