"""`manage.py signing_key create|rotate|revoke|list|publish`: the keys that sign exported bundles.

Private keys stay where they are (the key directory, or WORKBENCH_SIGNING_KEY): nothing here
prints one. ``publish`` writes the public documents (the JWKS and the validity document, as
``/.well-known/jwks.json`` and ``/.well-known/workbench-keys.json`` serve them) for offline
verifiers: ``workbench-verify --keys jwks.json --validity keys.json BUNDLE``.
"""

from __future__ import annotations

import sys
from datetime import datetime

import orjson
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.actions import ActionError
from runs.actions.signing import do_create_signing_key, do_revoke_signing_key, do_rotate_signing_key
from runs.models import Workspace
from runs.protocol.timestamps import to_datetime
from runs.selectors.signing import jwks_document, published_keys, validity_document


def _instant(text: str | None) -> datetime | None:
    if text is None:
        return None
    moment = to_datetime(text)
    if moment is None:
        raise CommandError(
            f"INVALID_INPUT: --at {text!r} is not an ISO 8601 date-time (e.g. 2026-05-01T12:00:00Z)"
        )
    return moment


class Command(BaseCommand):
    help = "Create, rotate, revoke, list and publish the Ed25519 keys that sign exported bundles."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        for name, text in (
            ("create", "create the first key (of the instance, or of --workspace)"),
            ("rotate", "a new key from --at (default now); the old one stops signing then, stays published"),
        ):
            p = sub.add_parser(name, help=text)
            p.add_argument("--workspace", help="a workspace's own key (default: the instance key)")
            p.add_argument("--at", help="ISO 8601 instant (default: now)")
        revoke = sub.add_parser(
            "revoke", help="revoke a key: bundles signed at or after --at fail verification"
        )
        revoke.add_argument(
            "kid",
            help="the key's id (RFC 7638 thumbprint, as `list` shows it; one that begins with - after --)",
        )
        revoke.add_argument("--at", help="ISO 8601 instant from which it is not trusted (default: now)")
        sub.add_parser("list", help="every key with its scope and validity (public data only)")
        publish = sub.add_parser(
            "publish", help="write the JWKS and the validity document for offline verifiers"
        )
        publish.add_argument("--jwks", required=True, metavar="FILE", help="JWKS output (- for stdout)")
        publish.add_argument("--validity", metavar="FILE", help="validity document output")

    def handle(self, *args, **options) -> None:
        action = options["action"]
        try:
            if action in ("create", "rotate"):
                workspace = None
                if options.get("workspace"):
                    workspace = Workspace.objects.filter(slug=options["workspace"]).first()
                    if workspace is None:
                        raise CommandError(f"UNKNOWN_WORKSPACE: no workspace {options['workspace']!r}")
                do = do_create_signing_key if action == "create" else do_rotate_signing_key
                row = do(workspace=workspace, at=_instant(options.get("at")))
                self.stdout.write(
                    f"{action}d key {row.kid} ({'workspace ' + workspace.slug if workspace else 'instance'})"
                )
            elif action == "revoke":
                row = do_revoke_signing_key(kid=options["kid"], at=_instant(options.get("at")))
                self.stdout.write(f"revoked key {row.kid} at {validity_of(row.kid).get('revokedAt')}")
            elif action == "list":
                self._list()
            else:
                self._publish(options["jwks"], options.get("validity"))
        except ActionError as exc:
            raise CommandError(str(exc)) from None

    def _list(self) -> None:
        rows = published_keys()
        validity = {entry["kid"]: entry for entry in validity_document(rows)["keys"]}
        if not rows:
            self.stdout.write("no signing keys yet (the first export creates the instance key)")
        for row in rows:
            v = validity[row.kid]
            scope = f"workspace {row.workspace.slug}" if row.workspace is not None else "instance"
            state = "revoked" if "revokedAt" in v else ("retired" if "notAfter" in v else "active")
            parts = [f"{row.kid}  {scope}  {state}  source={row.source}  notBefore={v.get('notBefore')}"]
            parts += [f"{m}={v[m]}" for m in ("notAfter", "revokedAt") if m in v]
            self.stdout.write("  ".join(parts))

    def _publish(self, jwks_path: str, validity_path: str | None) -> None:
        rows = published_keys()
        data = orjson.dumps(jwks_document(rows), option=orjson.OPT_INDENT_2) + b"\n"
        if jwks_path == "-":
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            with open(jwks_path, "wb") as fh:
                fh.write(data)
        if validity_path:
            with open(validity_path, "wb") as fh:
                fh.write(orjson.dumps(validity_document(rows), option=orjson.OPT_INDENT_2) + b"\n")


def validity_of(kid: str) -> dict:
    return next((e for e in validity_document()["keys"] if e["kid"] == kid), {})
