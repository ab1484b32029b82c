"""Run ids belong to a workspace: a surrogate primary key, (workspace, run_id) unique.

The old key was the protocol run id itself (global across workspaces). There is no production
data to carry over, so the run tables are dropped and created again (`manage.py demo_data`
seeds the demo again); workspaces, memberships and everything outside `runs` are kept.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0003_run_rejected_gates"),
    ]

    operations = [
        migrations.DeleteModel(name="CachedResponse"),
        migrations.DeleteModel(name="RunFork"),
        migrations.DeleteModel(name="RunSnapshot"),
        migrations.DeleteModel(name="RunParent"),
        migrations.DeleteModel(name="ArtifactVersion"),
        migrations.DeleteModel(name="RuleSetVersion"),
        migrations.DeleteModel(name="Event"),
        migrations.DeleteModel(name="Run"),
        migrations.CreateModel(
            name="Run",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("run_id", models.CharField(max_length=200)),
                ("workflow_id", models.CharField(db_index=True, max_length=200)),
                ("workflow_version", models.IntegerField(default=0)),
                ("title", models.CharField(blank=True, max_length=300)),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("running", "Running"),
                            ("completed", "Completed"),
                            ("failed", "Failed"),
                            ("cancelled", "Cancelled"),
                        ],
                        db_index=True,
                        max_length=16,
                    ),
                ),
                ("started_at", models.DateTimeField(db_index=True)),
                ("ended_at", models.DateTimeField(blank=True, null=True)),
                ("tags", models.JSONField(blank=True, default=list)),
                ("subject", models.JSONField(blank=True, null=True)),
                ("doc", models.TextField()),
                ("state", models.TextField()),
                ("revision", models.IntegerField(default=0)),
                ("last_seq", models.IntegerField(default=0)),
                ("has_engine", models.BooleanField(default=True)),
                ("imported_engine", models.TextField(blank=True, null=True)),
                ("import_doc", models.TextField(blank=True, null=True)),
                ("import_seq", models.IntegerField(blank=True, null=True)),
                ("pending_gates", models.IntegerField(db_index=True, default=0)),
                ("rejected_gates", models.IntegerField(db_index=True, default=0)),
                ("event_count", models.IntegerField(default=0)),
                ("model_calls", models.IntegerField(default=0)),
                ("total_tokens", models.BigIntegerField(default=0)),
                ("cost_totals", models.JSONField(blank=True, default=dict)),
                ("created_by", models.CharField(blank=True, max_length=200)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "workspace",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="runs", to="runs.workspace"
                    ),
                ),
            ],
            options={
                "ordering": ["-started_at", "-created_at"],
            },
        ),
        migrations.CreateModel(
            name="RuleSetVersion",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("rule_set_id", models.CharField(max_length=200)),
                ("version", models.IntegerField()),
                ("seq", models.IntegerField(blank=True, null=True)),
                ("body", models.TextField()),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="rule_set_versions",
                        to="runs.run",
                    ),
                ),
            ],
            options={
                "ordering": ["id"],
            },
        ),
        migrations.CreateModel(
            name="Event",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "run", "seq", blank=True, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("seq", models.IntegerField()),
                ("event_id", models.CharField(max_length=200)),
                ("type", models.CharField(max_length=40)),
                ("ts", models.CharField(max_length=40)),
                ("step_id", models.CharField(blank=True, default="", max_length=200)),
                ("correlation_id", models.CharField(blank=True, default="", max_length=200)),
                ("body", models.TextField()),
                ("actor", models.CharField(blank=True, default="", max_length=200)),
                ("recorded_at", models.DateTimeField(auto_now_add=True)),
                (
                    "run",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="events",
                        to="runs.run",
                    ),
                ),
            ],
            options={
                "ordering": ["seq"],
            },
        ),
        migrations.CreateModel(
            name="CachedResponse",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("key", models.CharField(max_length=64)),
                ("key_v1", models.CharField(max_length=64)),
                ("provider", models.CharField(blank=True, max_length=100)),
                ("model", models.CharField(blank=True, max_length=200)),
                ("source_run_id", models.CharField(blank=True, max_length=200)),
                ("request_seq", models.IntegerField(blank=True, null=True)),
                ("response_seq", models.IntegerField(blank=True, null=True)),
                ("request", models.TextField()),
                ("response", models.TextField()),
                ("response_digest", models.CharField(max_length=64)),
                ("hits", models.IntegerField(default=0)),
                ("last_hit_at", models.DateTimeField(blank=True, null=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "workspace",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="cached_responses",
                        to="runs.workspace",
                    ),
                ),
                (
                    "run",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="cached_responses",
                        to="runs.run",
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at"],
            },
        ),
        migrations.CreateModel(
            name="ArtifactVersion",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("key", models.CharField(max_length=300)),
                ("version", models.IntegerField()),
                ("type_id", models.CharField(max_length=200)),
                ("seq", models.IntegerField(blank=True, null=True)),
                ("body", models.TextField()),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="artifact_versions",
                        to="runs.run",
                    ),
                ),
            ],
            options={
                "ordering": ["id"],
            },
        ),
        migrations.CreateModel(
            name="RunFork",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("source_run_id", models.CharField(max_length=200)),
                (
                    "mode",
                    models.CharField(choices=[("replay", "Replay"), ("branch", "Branch")], max_length=16),
                ),
                ("from_seq", models.IntegerField()),
                ("overlay", models.JSONField(blank=True, default=dict)),
                ("history", models.IntegerField()),
                ("source_last_seq", models.IntegerField()),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("pending", "Pending"),
                            ("running", "Running"),
                            ("completed", "Completed"),
                            ("failed", "Failed"),
                            ("external", "External"),
                        ],
                        default="pending",
                        max_length=16,
                    ),
                ),
                ("error_code", models.CharField(blank=True, max_length=64)),
                ("error_message", models.TextField(blank=True)),
                ("cursor", models.IntegerField(default=0)),
                ("compared", models.IntegerField(default=0)),
                ("matched", models.IntegerField(default=0)),
                ("divergence", models.JSONField(blank=True, null=True)),
                ("cache_hits", models.IntegerField(default=0)),
                ("provider_calls", models.IntegerField(default=0)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                (
                    "run",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE, related_name="fork_info", to="runs.run"
                    ),
                ),
                (
                    "source",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="forks",
                        to="runs.run",
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="RunParent",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("parent_run_id", models.CharField(db_index=True, max_length=200)),
                ("position", models.IntegerField(default=0)),
                (
                    "child",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="parent_links",
                        to="runs.run",
                    ),
                ),
            ],
            options={
                "ordering": ["position"],
            },
        ),
        migrations.CreateModel(
            name="RunSnapshot",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("seq", models.IntegerField()),
                ("state", models.TextField()),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="snapshots", to="runs.run"
                    ),
                ),
            ],
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["workspace", "-started_at"], name="run_ws_started"),
        ),
        migrations.AddConstraint(
            model_name="run",
            constraint=models.UniqueConstraint(
                fields=("workspace", "run_id"), name="uniq_run_id_per_workspace"
            ),
        ),
        migrations.AddConstraint(
            model_name="rulesetversion",
            constraint=models.UniqueConstraint(
                fields=("run", "rule_set_id", "version"), name="uniq_ruleset_version"
            ),
        ),
        migrations.AddIndex(
            model_name="event",
            index=models.Index(fields=["run", "type", "seq"], name="event_run_type"),
        ),
        migrations.AddIndex(
            model_name="event",
            index=models.Index(fields=["run", "step_id", "seq"], name="event_run_step"),
        ),
        migrations.AddIndex(
            model_name="event",
            index=models.Index(fields=["run", "correlation_id", "seq"], name="event_run_corr"),
        ),
        migrations.AddIndex(
            model_name="cachedresponse",
            index=models.Index(fields=["workspace", "key"], name="cached_ws_key"),
        ),
        migrations.AddIndex(
            model_name="cachedresponse",
            index=models.Index(fields=["workspace", "key_v1"], name="cached_ws_key_v1"),
        ),
        migrations.AddConstraint(
            model_name="cachedresponse",
            constraint=models.UniqueConstraint(
                fields=("workspace", "key", "response_digest"), name="uniq_cached_response"
            ),
        ),
        migrations.AddConstraint(
            model_name="artifactversion",
            constraint=models.UniqueConstraint(
                fields=("run", "key", "version"), name="uniq_artifact_version"
            ),
        ),
        migrations.AddIndex(
            model_name="runfork",
            index=models.Index(fields=["status", "created_at"], name="runfork_status"),
        ),
        migrations.AddConstraint(
            model_name="runparent",
            constraint=models.UniqueConstraint(fields=("child", "parent_run_id"), name="uniq_run_parent"),
        ),
        migrations.AddConstraint(
            model_name="runsnapshot",
            constraint=models.UniqueConstraint(fields=("run", "seq"), name="uniq_snapshot_seq"),
        ),
        migrations.AddIndex(
            model_name="event",
            index=models.Index(fields=["run", "event_id"], name="event_run_event_id"),
        ),
    ]
