"""`manage.py bundle check|import|export`: the bundle CLI (other tools run these exact commands)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.actions import ActionError, do_import_bundle
from runs.actions.workspaces import get_or_create_workspace
from runs.protocol.errors import ErrorCode
from runs.protocol.redaction import POLICIES
from runs.protocol.verify_cli import check_files
from runs.selectors.bundles import export_bundle_bytes
from runs.selectors.runs import AmbiguousRunId, RunNotFound, dangerously_find_run_any_workspace


class Command(BaseCommand):
    help = "Verify, import or export protocol 1.0.0 run bundles."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        check = sub.add_parser("check", help="verify bundles without importing them")
        check.add_argument("files", nargs="+")
        check.add_argument("--json", action="store_true", help="one JSON line per file")
        imp = sub.add_parser("import", help="verify and import bundles (atomic per bundle)")
        imp.add_argument("files", nargs="+")
        imp.add_argument("--workspace", required=True, help="workspace slug (created if missing)")
        imp.add_argument("--as-new-id", action="store_true", help="import under a fresh run id on collision")
        exp = sub.add_parser("export", help="export a run as a signed canonical bundle")
        exp.add_argument("run_id")
        exp.add_argument("--workspace", help="workspace slug (needed when several workspaces use the id)")
        exp.add_argument("-o", "--output", help="file to write (default: stdout)")
        exp.add_argument(
            "--redact",
            choices=POLICIES,
            help="export a redacted user bundle by this policy (still signed; policy named in run.metadata): "
            "user is the reference's profile (payloads, tool data and metadata go, text stays); mask and "
            "drop leave nothing a person wrote or a model said",
        )

    def handle(self, *args, **options) -> None:
        action = options["action"]
        if action == "check":
            self._check(options["files"], as_json=options["json"])
        elif action == "import":
            self._import(options["files"], options["workspace"], as_new_id=options["as_new_id"])
        else:
            self._export(
                options["run_id"], options.get("output"), options.get("redact"), options.get("workspace")
            )

    def _check(self, files: list[str], *, as_json: bool) -> None:
        # The same lines as workbench-verify (manage.py hands plain `bundle check` to it
        # before Django starts; this path serves call_command and Django-only options).
        if not check_files(files, as_json=as_json, write=self.stdout.write):
            sys.exit(1)

    def _import(self, files: list[str], slug: str, *, as_new_id: bool) -> None:

        workspace = get_or_create_workspace(slug)
        failed = False
        for name in files:
            try:
                data = Path(name).read_bytes()
            except OSError as exc:
                self.stderr.write(f"{name}: INVALID_INPUT: {exc}")
                failed = True
                continue
            try:
                run = do_import_bundle(workspace=workspace, data=data, actor="cli:import")
            except ActionError as exc:
                if exc.code == ErrorCode.RUN_ID_COLLISION and as_new_id:
                    run = do_import_bundle(workspace=workspace, data=data, actor="cli:import", as_new_id=True)
                else:
                    self.stderr.write(f"{name}: {exc}")
                    failed = True
                    continue
            self.stdout.write(
                f"{name}: imported as {run.run_id} into {workspace.slug} ({run.last_seq} events)"
            )
        if failed:
            sys.exit(1)

    def _export(
        self, run_id: str, output: str | None, redact: str | None = None, workspace: str | None = None
    ) -> None:

        try:  # the CLI is an operator tool: every workspace
            run = dangerously_find_run_any_workspace(run_id, workspace)
        except RunNotFound:
            raise CommandError(f"UNKNOWN_RUN: no run {run_id!r}") from None
        except AmbiguousRunId as exc:
            raise CommandError(f"{exc.code}: {exc}") from None
        data = export_bundle_bytes(run, redact=redact)
        if output:
            fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        else:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
