"""`manage.py transcript RUN_ID [-o FILE] [--workspace SLUG] [--follow]`: a run as JSON lines.

Without --follow the transcript is rendered from the stored events (runs/protocol/transcript.py); with
--follow the run's recorded file (runs/telemetry/transcript_log.py) is printed and then tailed as the run
goes on, until its run.completed line.

Without -o the lines go to stdout. A file is created with mode 0600 (owner only) before anything is
written to it, and an existing file is narrowed to 0600 too: transcripts carry prompts and tool
arguments verbatim.
"""

from __future__ import annotations

import os

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.models import Workspace
from runs.protocol.redaction import POLICIES
from runs.selectors.runs import AmbiguousRunId, RunNotFound, dangerously_find_run_any_workspace, get_run
from runs.selectors.transcript import iter_run_transcript
from runs.telemetry.transcript_log import follow, sync_run, transcript_path


def open_private(path: str):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "wb")


class Command(BaseCommand):
    help = "Write a run's agent exchange transcript as JSON lines (stdout, or -o FILE with mode 0600)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id")
        parser.add_argument("-o", "--output", help="file to write (created 0600); default stdout")
        parser.add_argument("--workspace", help="slug of the workspace the run must belong to")
        parser.add_argument(
            "--follow",
            action="store_true",
            help="print the run's recorded transcript file, then each line as it is appended, "
            "until the run ends (Ctrl-C stops)",
        )
        parser.add_argument(
            "--after-seq", type=int, default=0, help="with --follow: skip lines up to this seq"
        )
        parser.add_argument(
            "--redact",
            choices=POLICIES,
            help="render the run as its redacted user bundle of this policy would hold it (not with "
            "--follow; a run that carries a redaction policy is always shown redacted by it)",
        )

    def handle(self, *args, **options) -> None:
        run_id = options["run_id"]
        if options["workspace"]:
            workspace = Workspace.objects.filter(slug=options["workspace"]).first()
            if workspace is None:
                raise CommandError(f"no workspace {options['workspace']!r}")
            try:
                run = get_run(workspace, run_id)
            except RunNotFound:
                raise CommandError(f"no run {run_id!r}") from None
        else:
            # The CLI is an operator tool on the server: any workspace, if the id names one run.
            try:
                run = dangerously_find_run_any_workspace(run_id)
            except RunNotFound:
                raise CommandError(f"no run {run_id!r}") from None
            except AmbiguousRunId as exc:
                raise CommandError(str(exc)) from None
        if options.get("redact") and options["follow"]:
            raise CommandError("INVALID_INPUT: --redact cannot be combined with --follow")
        if options["follow"]:
            sync_run(run)  # a run recorded before live transcripts existed catches up first
            lines = follow(transcript_path(run), after_seq=options["after_seq"])
        else:
            lines = iter_run_transcript(run, redact=options.get("redact"))
        if options["output"]:
            with open_private(options["output"]) as out:
                for line in lines:
                    out.write(line)
        else:
            out = getattr(self.stdout._out, "buffer", None)  # bytes straight through when it is a real stream
            for line in lines:
                if out is not None:
                    out.write(line)
                    if options["follow"]:
                        out.flush()
                else:
                    self.stdout.write(line.decode(), ending="")
            if out is not None:
                out.flush()
