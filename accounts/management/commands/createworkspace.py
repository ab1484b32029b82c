"""`workbench createworkspace SLUG [--name NAME]`: a new workspace.

Exit status: 0 created; 1 refused (INVALID_SLUG, INVALID_INPUT, WORKSPACE_EXISTS), nothing
changed; 2 bad usage.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.actions.workspaces import MembershipError, do_create_workspace


class Command(BaseCommand):
    help = "Create a workspace. Its owner: createuser NAME --workspace SLUG."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="the workspace's slug, as URLs spell it (e.g. acme)")
        parser.add_argument("--name", help="the name people see (default: the slug)")

    def handle(self, *args, **options) -> None:
        try:
            workspace = do_create_workspace(slug=options["slug"], name=options["name"])
        except MembershipError as error:
            raise CommandError(f"{error.code}: {error.message}", returncode=1) from None
        self.stdout.write(f"created workspace {workspace.slug} ({workspace.name})")
