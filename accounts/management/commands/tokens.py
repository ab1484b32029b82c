"""`manage.py tokens create|list|revoke`: API tokens of a workspace from the command line."""

from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import ALL_SCOPES, ApiToken
from accounts.tokens import TokenError, create_token, list_tokens, parse_duration, revoke_token
from runs.models import Workspace


def _workspace(slug: str) -> Workspace:
    try:
        return Workspace.objects.get(slug=slug)
    except Workspace.DoesNotExist:
        raise CommandError(f"no workspace {slug!r}") from None


class Command(BaseCommand):
    help = "Create, list or revoke API tokens of a workspace. A new token is printed once."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="create a token and print it (only this once)")
        create.add_argument("--workspace", required=True, help="workspace slug")
        create.add_argument("--name", required=True)
        create.add_argument(
            "--scope",
            "--scopes",
            dest="scopes",
            default="read",
            help=f"comma-separated scopes out of {','.join(ALL_SCOPES)} (default: read)",
        )
        create.add_argument("--expires-in", help="lifetime such as 90m, 12h, 30d, 2w (default: no expiry)")
        create.add_argument("--rate-limit", type=int, help="requests per rate window (default: the setting)")
        create.add_argument("--user", help="username recorded as the creator")
        create.add_argument(
            "--json", action="store_true", help="print a JSON object instead of the bare token"
        )
        lst = sub.add_parser("list", help="list a workspace's tokens (never their secrets)")
        lst.add_argument("--workspace", required=True)
        lst.add_argument("--json", action="store_true")
        revoke = sub.add_parser("revoke", help="revoke a token by its key id")
        revoke.add_argument("key_id")
        revoke.add_argument("--workspace", required=True)

    def handle(self, *args, **options) -> None:
        action = options["action"]
        workspace = _workspace(options["workspace"])
        if action == "create":
            self._create(workspace, options)
        elif action == "list":
            self._list(workspace, as_json=options["json"])
        else:
            self._revoke(workspace, options["key_id"])

    def _create(self, workspace: Workspace, options: dict) -> None:
        user = None
        if options.get("user"):
            user = get_user_model().objects.filter(username=options["user"]).first()
            if user is None:
                raise CommandError(f"no user {options['user']!r}")
        try:
            expires_in = parse_duration(options["expires_in"]) if options.get("expires_in") else None
            issued = create_token(
                workspace=workspace,
                name=options["name"],
                scopes=options["scopes"].split(","),
                created_by=user,
                expires_in=expires_in,
                rate_limit=options.get("rate_limit"),
            )
        except TokenError as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(json.dumps({**_describe(issued.token), "token": issued.secret}))
        else:
            self.stderr.write(f"Token {issued.token.key_id} for {workspace.slug} (shown once, store it now):")
            self.stdout.write(issued.secret)

    def _list(self, workspace: Workspace, *, as_json: bool) -> None:
        tokens = list_tokens(workspace)
        if as_json:
            self.stdout.write(json.dumps([_describe(t) for t in tokens]))
            return
        if not tokens:
            self.stdout.write(f"no tokens in {workspace.slug}")
            return
        for t in tokens:
            expires = t.expires_at.isoformat() if t.expires_at else "never"
            self.stdout.write(
                f"{t.key_id}  {t.status:<8} {','.join(t.scopes):<18} expires {expires}  {t.name}"
            )

    def _revoke(self, workspace: Workspace, key_id: str) -> None:
        try:
            token = revoke_token(workspace=workspace, key_id=key_id)
        except ApiToken.DoesNotExist:
            raise CommandError(f"no token {key_id!r} in workspace {workspace.slug!r}") from None
        self.stdout.write(f"revoked {token.key_id} ({token.name})")


def _describe(token: ApiToken) -> dict:
    return {
        "keyId": token.key_id,
        "name": token.name,
        "workspace": token.workspace.slug,
        "scopes": token.scopes,
        "status": token.status,
        "createdAt": token.created_at.isoformat(),
        "expiresAt": token.expires_at.isoformat() if token.expires_at else None,
        "lastUsedAt": token.last_used_at.isoformat() if token.last_used_at else None,
    }
