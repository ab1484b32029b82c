"""`manage.py bundle check|import|export`: the bundle CLI (other tools run these exact commands)."""

from __future__ import annotations

import getpass
import os
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.actions import ActionError, do_import_bundle
from runs.actions.signing import do_export_bundle
from runs.actions.workspaces import get_or_create_workspace
from runs.protocol.errors import ErrorCode
from runs.protocol.redaction import POLICIES
from runs.protocol.verify_cli import EXIT_USAGE, check_files, load_signing
from runs.selectors.runs import AmbiguousRunId, RunNotFound, dangerously_find_run_any_workspace


class Command(BaseCommand):
    help = "Verify, import or export protocol 1.0.0 run bundles."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        check = sub.add_parser("check", help="verify bundles without importing them")
        check.add_argument("files", nargs="+")
        check.add_argument("--json", action="store_true", help="one JSON line per file")
        check.add_argument("--keys", metavar="JWKS", help="JWKS of the signing keys: verify signatures too")
        check.add_argument("--validity", metavar="FILE", help="key validity document (needs --keys)")
        check.add_argument(
            "--require-signature", action="store_true", help="refuse unsigned bundles (needs --keys)"
        )
        check.add_argument("--detached", metavar="FILE", help="a detached DSSE envelope for the one bundle")
        imp = sub.add_parser("import", help="verify and import bundles (atomic per bundle)")
        imp.add_argument("files", nargs="+")
        imp.add_argument("--workspace", required=True, help="workspace slug (created if missing)")
        imp.add_argument("--as-new-id", action="store_true", help="import under a fresh run id on collision")
        exp = sub.add_parser(
            "export", help="export a run as a canonical bundle, signed with this instance's Ed25519 key"
        )
        exp.add_argument("run_id")
        exp.add_argument("--workspace", help="workspace slug (needed when several workspaces use the id)")
        exp.add_argument("-o", "--output", help="file to write (default: stdout)")
        exp.add_argument(
            "--redact",
            choices=POLICIES,
            help="export a redacted user bundle by this policy (hashed and signed over what it holds; "
            "policy named in run.metadata and in the signature): user is the reference's profile "
            "(payloads, tool data and metadata go, text stays); mask and drop leave nothing a person wrote "
            "or a model said",
        )
        exp.add_argument(
            "--detached", metavar="FILE", help="also write the signature alone (a DSSE envelope) to FILE"
        )
        exp.add_argument(
            "--exported-by",
            help="who the signature names as the exporter (default: cli:<operating-system user>)",
        )

    def handle(self, *args, **options) -> None:
        action = options["action"]
        if action == "check":
            self._check(options["files"], options)
        elif action == "import":
            self._import(options["files"], options["workspace"], as_new_id=options["as_new_id"])
        else:
            self._export(options["run_id"], options)

    def _check(self, files: list[str], options: dict) -> None:
        # The same lines as workbench-verify (manage.py hands plain `bundle check` to it
        # before Django starts; this path serves call_command and Django-only options).
        signing = None
        keys = options.get("keys")
        if keys is None and (
            options.get("validity") or options.get("require_signature") or options.get("detached")
        ):
            raise CommandError("--validity, --require-signature and --detached need --keys")
        if options.get("detached") and len(files) != 1:
            raise CommandError("--detached goes with exactly one bundle file")
        if keys is not None:
            try:
                signing = load_signing(
                    keys,
                    options.get("validity"),
                    require_signature=bool(options.get("require_signature")),
                    detached=options.get("detached"),
                )
            except ValueError as exc:
                self.stderr.write(f"bundle check: {exc}")
                sys.exit(EXIT_USAGE)
        statuses: list[int] = []
        check_files(
            files, as_json=options["json"], write=self.stdout.write, signing=signing, statuses=statuses
        )
        status = next((s for s in statuses if s), 0)
        if status:
            sys.exit(status)

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

    def _export(self, run_id: str, options: dict) -> None:
        output, redact, workspace = options.get("output"), options.get("redact"), options.get("workspace")
        try:  # the CLI is an operator tool: every workspace
            run = dangerously_find_run_any_workspace(run_id, workspace)
        except RunNotFound:
            raise CommandError(f"UNKNOWN_RUN: no run {run_id!r}") from None
        except AmbiguousRunId as exc:
            raise CommandError(f"{exc.code}: {exc}") from None
        exported_by = options.get("exported_by") or f"cli:{_os_user()}"
        try:
            export = do_export_bundle(run, exported_by=exported_by, redact=redact)
        except ActionError as exc:
            raise CommandError(str(exc)) from None
        if options.get("detached"):
            _write_private(options["detached"], export.envelope_bytes)
        if output:
            _write_private(output, export.data)
        else:
            sys.stdout.buffer.write(export.data)
            sys.stdout.buffer.flush()


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        return str(os.getuid())


def _write_private(name: str, data: bytes) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
