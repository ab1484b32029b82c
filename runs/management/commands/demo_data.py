"""`manage.py demo_data`: demo workspace, demo runs and a local admin whose credentials are printed."""

from __future__ import annotations

import os
import secrets
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from runs.actions.workspaces import add_member, get_or_create_workspace
from runs.demo.job_search import DEMO_RUN_ID, build_demo
from runs.demo.public import import_batch, publish_snapshot
from runs.models import Role
from runs.selectors.runs import runs_of


class Command(BaseCommand):
    help = "Load the demo workspace and runs, and create a local admin user."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--url",
            default="http://127.0.0.1:8000/",
            help="where the server will be (printed with the login)",
        )

    def handle(self, *args, **options) -> None:
        started = time.perf_counter()
        workspace = get_or_create_workspace("demo", name="Demo")
        runs = build_demo(workspace)  # the job-search runs: waiting, rejected, completed, a fork
        batch = import_batch(workspace)
        public = publish_snapshot(next(r for r in runs if r.run_id == DEMO_RUN_ID))
        username, password = self._admin()
        add_member(workspace, get_user_model().objects.get(username=username), Role.OWNER)
        self.stdout.write(
            f"demo workspace '{workspace.slug}': {runs_of(workspace).count()} runs ({batch.event_count:,} events in "
            f"{batch.run_id}); public read-only demo {public.run_id} in '{public.workspace.slug}' "
            f"({time.perf_counter() - started:.1f} s)"
        )
        self.stdout.write(f"sign in at {options['url']} as {username} / {password}")
        self.stdout.write(f"(the password is kept in {settings.VAR_DIR / 'admin_password'})")

    def _admin(self) -> tuple[str, str]:
        User = get_user_model()
        username = "admin"
        cred_file = settings.VAR_DIR / "admin_password"
        user = User.objects.filter(username=username).first()
        if user is not None and cred_file.exists():
            return username, cred_file.read_text().strip()
        password = secrets.token_urlsafe(12)
        cred_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(cred_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(password)
        if user is None:
            User.objects.create_superuser(username=username, email="admin@localhost", password=password)
        else:
            user.set_password(password)
            user.save()
        return username, password
