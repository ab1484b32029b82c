"""`workbench createuser USERNAME --workspace SLUG [--email E] [--role R] [--password-from-stdin]`.

A new account owning (by default) an existing workspace. The password comes from standard input
(its first line) with --password-from-stdin, else from a prompt on a terminal; with neither the
account cannot sign in with a password until one is set (Django's changepassword).

Exit status: 0 created; 1 refused (NO_WORKSPACE, INVALID_USERNAME, USERNAME_TAKEN,
INVALID_EMAIL, WEAK_PASSWORD, INVALID_ROLE, NO_PASSWORD), nothing changed; 2 bad usage.
"""

from __future__ import annotations

import getpass
import sys

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.users import AccountError, do_create_user
from runs.models import Role, Workspace


class Command(BaseCommand):
    help = "Create a user who owns a workspace (createworkspace first)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--workspace", required=True, help="slug of an existing workspace")
        parser.add_argument("--email", default="")
        parser.add_argument("--role", default=Role.OWNER, choices=Role.values, help="default: owner")
        parser.add_argument(
            "--password-from-stdin", action="store_true", help="read the password from standard input"
        )

    def _password(self, options: dict) -> str | None:
        if options["password_from_stdin"]:
            password = sys.stdin.readline().rstrip("\r\n")
            if not password:
                raise CommandError("NO_PASSWORD: standard input held no password", returncode=1)
            return password
        if sys.stdin.isatty():
            first = getpass.getpass("Password: ")
            if first != getpass.getpass("Password (again): "):
                raise CommandError("NO_PASSWORD: the two passwords differ", returncode=1)
            return first
        return None

    def handle(self, *args, **options) -> None:
        try:
            workspace = Workspace.objects.get(slug=options["workspace"])
        except Workspace.DoesNotExist:
            raise CommandError(
                f"NO_WORKSPACE: no workspace {options['workspace']!r} (workbench createworkspace)",
                returncode=1,
            ) from None
        password = self._password(options)
        try:
            user = do_create_user(
                username=options["username"],
                workspace=workspace,
                role=options["role"],
                email=options["email"],
                password=password,
            )
        except AccountError as error:
            raise CommandError(f"{error.code}: {error.message}", returncode=1) from None
        self.stdout.write(f"created user {user} ({options['role']} of {workspace.slug})")
        if password is None:
            self.stdout.write("no password set: `workbench manage changepassword` sets one")
