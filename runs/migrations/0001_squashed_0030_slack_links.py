"""Every migration of runs up to 0030_slack_links, squashed (issue 53).

A fresh database applies this one; a database partway through applies the rest of the old ones
(still here, named in ``replaces``). The old data migrations (0010, 0011, 0015, 0018, 0024 and
0025's backfills) read stored runs and events, which a fresh database does not have: they are
left out. What 0013_search_trigram and 0019_search_text_index built on PostgreSQL is here, as
they left it: the pg_trgm extension (where it can be created), the SQL function
``wb_search_text(body)`` and the runs search's two trigram indexes. SQLite: nothing (its
``wb_search_text`` is registered on each connection; it has no trigram index).
"""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

from runs.migrations._operations import CreateModels

from runs.fields import SEARCH_TEXT_FUNCTION


SEARCH_INDEXES = {
    "run_search_trgm": (
        "CREATE INDEX IF NOT EXISTS run_search_trgm ON runs_run USING gin"
        " (upper(run_id::text) gin_trgm_ops, upper(title::text) gin_trgm_ops,"
        " upper(workflow_id::text) gin_trgm_ops)"
    ),
    "event_model_io_text_trgm": (
        "CREATE INDEX IF NOT EXISTS event_model_io_text_trgm ON runs_event"
        " USING gin (upper(wb_search_text(body)) gin_trgm_ops) WHERE type = 'model_io'"
    ),
}


def create_search(apps, schema_editor):
    """PostgreSQL: 0013's extension (a warning and no index where it cannot be created), 0019's
    function, and both migrations' indexes as 0019 left them."""
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "DO $$ BEGIN CREATE EXTENSION IF NOT EXISTS pg_trgm;"
            " EXCEPTION WHEN insufficient_privilege THEN"
            " RAISE WARNING 'pg_trgm could not be created: the runs search runs without its index';"
            " END $$"
        )
        cursor.execute(SEARCH_TEXT_FUNCTION)
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")
        if cursor.fetchone() is None:
            return
        for sql in SEARCH_INDEXES.values():
            cursor.execute(sql)


def drop_search(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for name in SEARCH_INDEXES:
            cursor.execute(f"DROP INDEX IF EXISTS {name}")
        cursor.execute("DROP FUNCTION IF EXISTS wb_search_text(text)")


class Migration(migrations.Migration):

    initial = True

    replaces = [
        ('runs', '0001_initial'),
        ('runs', '0002_cachedresponse_runfork'),
        ('runs', '0003_run_rejected_gates'),
        ('runs', '0004_run_surrogate_key'),
        ('runs', '0005_invitation'),
        ('runs', '0006_fork_waiting'),
        ('runs', '0007_otel_trace_runs'),
        ('runs', '0008_webhooks'),
        ('runs', '0009_signing_keys'),
        ('runs', '0010_event_span_ref'),
        ('runs', '0011_rollups'),
        ('runs', '0012_list_indexes'),
        ('runs', '0013_search_trigram'),
        ('runs', '0014_prompts'),
        ('runs', '0015_cost_rollup_prompt'),
        ('runs', '0016_import_jobs'),
        ('runs', '0017_event_step_starts'),
        ('runs', '0018_run_cost_rollup'),
        ('runs', '0019_search_text_index'),
        ('runs', '0020_event_run_no_db_constraint'),
        ('runs', '0021_webhook_breaker_delivery_lease'),
        ('runs', '0022_worker_lease_and_job_tasks'),
        ('runs', '0023_runfork_task'),
        ('runs', '0024_dashboard_rollups'),
        ('runs', '0025_run_list_sort_keys'),
        ('runs', '0026_gate_policies'),
        ('runs', '0027_monitors'),
        ('runs', '0028_budgets'),
        ('runs', '0029_gate_links'),
        ('runs', '0030_slack_links'),
    ]

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        # After every migration of the libraries' apps, not only their first: each of their later
        # migrations that touches a model related to the user renders every model related to it
        # again, which is all of ours once they exist (seconds, on an empty database).
        ("admin", "0003_logentry_add_action_flag_choices"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("django_tasks_database", "0021_conditional_partial_index_ordering"),
        ("oauth2_provider", "0022_refreshtoken_token_family_index"),
    ]

    operations = [
        CreateModels(
            migrations.CreateModel(
                name='Run',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('run_id', models.CharField(max_length=200)),
                    ('workflow_id', models.CharField(db_index=True, max_length=200)),
                    ('workflow_version', models.IntegerField(default=0)),
                    ('title', models.CharField(blank=True, max_length=300)),
                    ('status', models.CharField(choices=[('running', 'Running'), ('completed', 'Completed'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], db_index=True, max_length=16)),
                    ('started_at', models.DateTimeField(db_index=True)),
                    ('ended_at', models.DateTimeField(blank=True, null=True)),
                    ('tags', models.JSONField(blank=True, default=list)),
                    ('subject', models.JSONField(blank=True, null=True)),
                    ('doc', models.TextField()),
                    ('state', models.TextField()),
                    ('revision', models.IntegerField(default=0)),
                    ('last_seq', models.IntegerField(default=0)),
                    ('has_engine', models.BooleanField(default=True)),
                    ('imported_engine', models.TextField(blank=True, null=True)),
                    ('import_doc', models.TextField(blank=True, null=True)),
                    ('import_seq', models.IntegerField(blank=True, null=True)),
                    ('import_attestation', models.TextField(blank=True, null=True)),
                    ('pending_gates', models.IntegerField(db_index=True, default=0)),
                    ('rejected_gates', models.IntegerField(db_index=True, default=0)),
                    ('event_count', models.IntegerField(default=0)),
                    ('model_calls', models.IntegerField(default=0)),
                    ('total_tokens', models.BigIntegerField(default=0)),
                    ('cost_totals', models.JSONField(blank=True, default=dict)),
                    ('duration_ms', models.BigIntegerField(db_default=-1, default=-1)),
                    ('cost_amount', models.FloatField(db_default=0.0, default=0.0)),
                    ('error_count', models.IntegerField(db_default=0, default=0)),
                    ('created_by', models.CharField(blank=True, max_length=200)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('updated_at', models.DateTimeField(auto_now=True)),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='runs', to='runs.workspace')),
                ],
                options={
                    'ordering': ['-started_at', '-created_at'],
                    'indexes': [models.Index(fields=['workspace', '-started_at', '-id'], name='run_ws_started_pk'), models.Index(fields=['workspace', 'status', '-started_at', '-id'], name='run_ws_status_started'), models.Index(fields=['workspace', 'workflow_id', '-started_at', '-id'], name='run_ws_workflow_started'), models.Index(condition=models.Q(('rejected_gates__gt', 0)), fields=['workspace', '-started_at', '-id'], name='run_ws_rejected'), models.Index(fields=['workspace', '-duration_ms', '-id'], name='run_ws_duration'), models.Index(fields=['workspace', '-cost_amount', '-id'], name='run_ws_cost'), models.Index(fields=['workspace', '-total_tokens', '-id'], name='run_ws_tokens'), models.Index(fields=['workspace', '-error_count', '-id'], name='run_ws_errors'), models.Index(condition=models.Q(('pending_gates__gt', 0), ('status', 'running')), fields=['workspace', '-started_at', '-id'], name='run_ws_waiting')],
                    'constraints': [models.UniqueConstraint(fields=('workspace', 'run_id'), name='uniq_run_id_per_workspace')],
                },
            ),
            migrations.CreateModel(
                name='SlackSeenRequest',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('digest', models.CharField(max_length=64, unique=True)),
                    ('seen_at', models.DateTimeField(db_index=True)),
                ],
            ),
            migrations.CreateModel(
                name='Webhook',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('public_id', models.CharField(max_length=40, unique=True)),
                    ('kind', models.CharField(choices=[('webhook', 'Webhook (Standard Webhooks, signed)'), ('slack', 'Slack incoming webhook')], default='webhook', max_length=16)),
                    ('url', models.CharField(max_length=2000)),
                    ('description', models.CharField(blank=True, max_length=200)),
                    ('events', models.JSONField(default=list)),
                    ('secret', models.CharField(max_length=120)),
                    ('previous_secret', models.CharField(blank=True, max_length=120)),
                    ('previous_secret_until', models.DateTimeField(blank=True, null=True)),
                    ('enabled', models.BooleanField(default=True)),
                    ('disabled_reason', models.CharField(blank=True, max_length=500)),
                    ('disabled_at', models.DateTimeField(blank=True, null=True)),
                    ('created_by', models.CharField(blank=True, max_length=200)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('consecutive_failures', models.IntegerField(default=0)),
                    ('failing_since', models.DateTimeField(blank=True, null=True)),
                    ('last_failure', models.CharField(blank=True, max_length=500)),
                    ('backoff_until', models.DateTimeField(blank=True, null=True)),
                    ('backoffs', models.IntegerField(default=0)),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='webhooks', to='runs.workspace')),
                ],
                options={
                    'ordering': ['created_at', 'id'],
                    'indexes': [models.Index(fields=['workspace', 'enabled'], name='webhook_ws_enabled')],
                },
            ),
            migrations.CreateModel(
                name='WorkerLease',
                fields=[
                    ('worker_id', models.CharField(max_length=64, primary_key=True, serialize=False)),
                    ('hostname', models.CharField(blank=True, max_length=200)),
                    ('pid', models.IntegerField(default=0)),
                    ('queues', models.CharField(blank=True, max_length=400)),
                    ('threads', models.IntegerField(default=1)),
                    ('started_at', models.DateTimeField(auto_now_add=True)),
                    ('heartbeat_at', models.DateTimeField(db_index=True)),
                ],
                options={
                    'ordering': ['started_at'],
                },
            ),
            migrations.CreateModel(
                name='Workspace',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('slug', models.SlugField(max_length=64, unique=True)),
                    ('name', models.CharField(max_length=200)),
                    ('is_personal', models.BooleanField(default=False)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                ],
                options={
                    'ordering': ['name'],
                },
            ),
            migrations.CreateModel(
                name='Delivery',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('public_id', models.CharField(max_length=40, unique=True)),
                    ('channel', models.CharField(choices=[('webhook', 'Webhook'), ('slack', 'Slack'), ('email', 'Email')], max_length=16)),
                    ('event_type', models.CharField(max_length=40)),
                    ('payload', models.TextField()),
                    ('status', models.CharField(choices=[('pending', 'Pending'), ('delivered', 'Delivered'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], default='pending', max_length=16)),
                    ('attempts', models.IntegerField(default=0)),
                    ('next_attempt_at', models.DateTimeField()),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('last_attempt_at', models.DateTimeField(blank=True, null=True)),
                    ('delivered_at', models.DateTimeField(blank=True, null=True)),
                    ('response_status', models.IntegerField(blank=True, null=True)),
                    ('response_excerpt', models.CharField(blank=True, max_length=500)),
                    ('error', models.CharField(blank=True, max_length=500)),
                    ('lease_until', models.DateTimeField(blank=True, null=True)),
                    ('recipient', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('webhook', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='runs.webhook')),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='runs.workspace')),
                ],
                options={
                    'ordering': ['-created_at', '-id'],
                    'indexes': [models.Index(fields=['status', 'next_attempt_at'], name='delivery_due'), models.Index(fields=['webhook', '-created_at', '-id'], name='delivery_hook_recent'), models.Index(condition=models.Q(('lease_until__isnull', False)), fields=['lease_until'], name='delivery_in_flight')],
                },
            ),
            migrations.CreateModel(
                name='Prompt',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('name', models.CharField(max_length=200)),
                    ('type', models.CharField(choices=[('text', 'Text'), ('chat', 'Chat messages')], default='text', max_length=8)),
                    ('tags', models.JSONField(blank=True, default=list)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('created_by', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='prompts', to='runs.workspace')),
                ],
                options={
                    'ordering': ['name'],
                    'constraints': [models.UniqueConstraint(fields=('workspace', 'name'), name='uniq_prompt_name')],
                },
            ),
            migrations.CreateModel(
                name='PromptVersion',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('number', models.PositiveIntegerField()),
                    ('body', models.TextField()),
                    ('config', models.TextField(default='{}')),
                    ('message', models.CharField(blank=True, max_length=500)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('created_by', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('prompt', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='runs.prompt')),
                ],
                options={
                    'ordering': ['prompt_id', 'number'],
                    'constraints': [models.UniqueConstraint(fields=('prompt', 'number'), name='uniq_prompt_version')],
                },
            ),
            migrations.CreateModel(
                name='PromptLabel',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('name', models.CharField(max_length=40)),
                    ('updated_at', models.DateTimeField(auto_now=True)),
                    ('prompt', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='labels', to='runs.prompt')),
                    ('updated_by', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('version', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='labels', to='runs.promptversion')),
                ],
                options={
                    'constraints': [models.UniqueConstraint(fields=('prompt', 'name'), name='uniq_prompt_label')],
                },
            ),
            migrations.CreateModel(
                name='RuleSetVersion',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('rule_set_id', models.CharField(max_length=200)),
                    ('version', models.IntegerField()),
                    ('seq', models.IntegerField(blank=True, null=True)),
                    ('body', models.TextField()),
                    ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='rule_set_versions', to='runs.run')),
                ],
                options={
                    'ordering': ['id'],
                    'constraints': [models.UniqueConstraint(fields=('run', 'rule_set_id', 'version'), name='uniq_ruleset_version')],
                },
            ),
            migrations.CreateModel(
                name='GateDecisionMeta',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('event_id', models.CharField(max_length=200)),
                    ('metadata', models.JSONField(default=dict)),
                    ('recorded_at', models.DateTimeField(auto_now_add=True)),
                    ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.run')),
                ],
                options={
                    'constraints': [models.UniqueConstraint(fields=('run', 'event_id'), name='gatemeta_run_event')],
                },
            ),
            migrations.CreateModel(
                name='Event',
                fields=[
                    ('pk', models.CompositePrimaryKey('run', 'seq', blank=True, editable=False, primary_key=True, serialize=False)),
                    ('seq', models.IntegerField()),
                    ('event_id', models.CharField(max_length=200)),
                    ('type', models.CharField(max_length=40)),
                    ('ts', models.CharField(max_length=40)),
                    ('step_id', models.CharField(blank=True, default='', max_length=200)),
                    ('correlation_id', models.CharField(blank=True, default='', max_length=200)),
                    ('body', models.TextField()),
                    ('actor', models.CharField(blank=True, default='', max_length=200)),
                    ('recorded_at', models.DateTimeField(auto_now_add=True)),
                    ('span_ref', models.CharField(blank=True, default='', max_length=220)),
                    ('run', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='events', to='runs.run')),
                ],
                options={
                    'ordering': ['seq'],
                    'indexes': [models.Index(fields=['run', 'type', 'seq'], name='event_run_type'), models.Index(fields=['run', 'step_id', 'seq'], name='event_run_step'), models.Index(fields=['run', 'correlation_id', 'seq'], name='event_run_corr'), models.Index(fields=['run', 'event_id'], name='event_run_event_id'), models.Index(fields=['run', 'type', 'span_ref', 'seq'], name='event_run_span'), models.Index(condition=models.Q(('type', 'step_started')), fields=['run', 'step_id', 'seq'], name='event_step_starts')],
                },
            ),
            migrations.CreateModel(
                name='ArtifactVersion',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('key', models.CharField(max_length=300)),
                    ('version', models.IntegerField()),
                    ('type_id', models.CharField(max_length=200)),
                    ('seq', models.IntegerField(blank=True, null=True)),
                    ('body', models.TextField()),
                    ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='artifact_versions', to='runs.run')),
                ],
                options={
                    'ordering': ['id'],
                    'constraints': [models.UniqueConstraint(fields=('run', 'key', 'version'), name='uniq_artifact_version')],
                },
            ),
            migrations.CreateModel(
                name='RunBudget',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('run_limit', models.DecimalField(decimal_places=6, max_digits=14)),
                    ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('run', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.run')),
                ],
            ),
            migrations.CreateModel(
                name='RunCostRollup',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('calls', models.BigIntegerField(default=0)),
                    ('input_tokens', models.DecimalField(decimal_places=0, default=0, max_digits=32)),
                    ('output_tokens', models.DecimalField(decimal_places=0, default=0, max_digits=32)),
                    ('total_tokens', models.DecimalField(decimal_places=0, default=0, max_digits=32)),
                    ('cached_input_tokens', models.DecimalField(decimal_places=0, default=0, max_digits=32)),
                    ('reasoning_tokens', models.DecimalField(decimal_places=0, default=0, max_digits=32)),
                    ('duration_ms', models.TextField(default='0')),
                    ('cost', models.TextField(default='0')),
                    ('key_hash', models.CharField(max_length=64)),
                    ('call_day', models.CharField(max_length=10)),
                    ('provider', models.TextField(default='')),
                    ('model', models.TextField(default='')),
                    ('step_id', models.TextField(default='')),
                    ('currency', models.TextField(default='')),
                    ('pricing', models.TextField(default='')),
                    ('pricing_label', models.TextField(default='')),
                    ('prompt', models.TextField(default='')),
                    ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.run')),
                ],
                options={
                    'constraints': [models.UniqueConstraint(fields=('run', 'key_hash'), name='uniq_run_cost_rollup')],
                },
            ),
            migrations.CreateModel(
                name='RunFork',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('source_run_id', models.CharField(max_length=200)),
                    ('mode', models.CharField(choices=[('replay', 'Replay'), ('branch', 'Branch')], max_length=16)),
                    ('from_seq', models.IntegerField()),
                    ('overlay', models.JSONField(blank=True, default=dict)),
                    ('history', models.IntegerField()),
                    ('source_last_seq', models.IntegerField()),
                    ('status', models.CharField(choices=[('pending', 'Pending'), ('running', 'Running'), ('completed', 'Completed'), ('failed', 'Failed'), ('external', 'External'), ('waiting', 'Waiting')], default='pending', max_length=16)),
                    ('error_code', models.CharField(blank=True, max_length=64)),
                    ('error_message', models.TextField(blank=True)),
                    ('cursor', models.IntegerField(default=0)),
                    ('compared', models.IntegerField(default=0)),
                    ('matched', models.IntegerField(default=0)),
                    ('divergence', models.JSONField(blank=True, null=True)),
                    ('cache_hits', models.IntegerField(default=0)),
                    ('provider_calls', models.IntegerField(default=0)),
                    ('task_id', models.CharField(blank=True, max_length=64)),
                    ('attempts', models.IntegerField(default=0)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('started_at', models.DateTimeField(blank=True, null=True)),
                    ('finished_at', models.DateTimeField(blank=True, null=True)),
                    ('run', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='fork_info', to='runs.run')),
                    ('source', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='forks', to='runs.run')),
                ],
                options={
                    'indexes': [models.Index(fields=['status', 'created_at'], name='runfork_status')],
                },
            ),
            migrations.CreateModel(
                name='RunMetricRollup',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('key_hash', models.CharField(max_length=64)),
                    ('kind', models.CharField(max_length=20)),
                    ('label', models.TextField(default='')),
                    ('reviewer', models.TextField(default='')),
                    ('decision', models.TextField(default='')),
                    ('bucket', models.SmallIntegerField(default=0)),
                    ('count', models.BigIntegerField(default=0)),
                    ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.run')),
                ],
                options={
                    'constraints': [models.UniqueConstraint(fields=('run', 'key_hash'), name='uniq_run_metric_rollup')],
                },
            ),
            migrations.CreateModel(
                name='RunParent',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('parent_run_id', models.CharField(db_index=True, max_length=200)),
                    ('position', models.IntegerField(default=0)),
                    ('child', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='parent_links', to='runs.run')),
                ],
                options={
                    'ordering': ['position'],
                    'constraints': [models.UniqueConstraint(fields=('child', 'parent_run_id'), name='uniq_run_parent')],
                },
            ),
            migrations.CreateModel(
                name='RunSnapshot',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('seq', models.IntegerField()),
                    ('state', models.TextField()),
                    ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='snapshots', to='runs.run')),
                ],
                options={
                    'constraints': [models.UniqueConstraint(fields=('run', 'seq'), name='uniq_snapshot_seq')],
                },
            ),
            migrations.CreateModel(
                name='SlackGateMessage',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('run_id', models.CharField(max_length=200)),
                    ('step_id', models.CharField(max_length=200)),
                    ('gate', models.CharField(max_length=20)),
                    ('checkpoint', models.CharField(blank=True, default='', max_length=200)),
                    ('channel_id', models.CharField(max_length=80)),
                    ('ts', models.CharField(max_length=40)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('webhook', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.webhook')),
                ],
                options={
                    'ordering': ['created_at', 'id'],
                    'indexes': [models.Index(fields=['webhook', 'run_id'], name='slack_msg_run')],
                },
            ),
            migrations.CreateModel(
                name='SlackApp',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('channel_id', models.CharField(max_length=80)),
                    ('bot_token', models.CharField(max_length=300)),
                    ('signing_secret', models.CharField(max_length=200)),
                    ('email_match', models.BooleanField(default=False)),
                    ('webhook', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='slack_app', to='runs.webhook')),
                ],
            ),
            migrations.CreateModel(
                name='WorkflowBudget',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('workflow_id', models.TextField()),
                    ('run_limit', models.DecimalField(decimal_places=6, max_digits=14)),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.workspace')),
                ],
                options={
                    'constraints': [models.UniqueConstraint(fields=('workspace', 'workflow_id'), name='uniq_workflow_budget')],
                },
            ),
            migrations.CreateModel(
                name='SlackLink',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('team_id', models.CharField(max_length=40)),
                    ('slack_user_id', models.CharField(max_length=40)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='slack_links', to=settings.AUTH_USER_MODEL)),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.workspace')),
                ],
                options={
                    'ordering': ['created_at', 'id'],
                    'constraints': [models.UniqueConstraint(fields=('workspace', 'team_id', 'slack_user_id'), name='uniq_slack_link_user')],
                },
            ),
            migrations.CreateModel(
                name='SigningKey',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('kid', models.CharField(max_length=64, unique=True)),
                    ('x', models.CharField(max_length=64)),
                    ('source', models.CharField(default='file', max_length=8)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('not_before', models.DateTimeField()),
                    ('not_after', models.DateTimeField(blank=True, null=True)),
                    ('revoked_at', models.DateTimeField(blank=True, null=True)),
                    ('workspace', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='signing_keys', to='runs.workspace')),
                ],
                options={
                    'ordering': ['not_before', 'id'],
                },
            ),
            migrations.CreateModel(
                name='RunRollup',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('run_day', models.DateField()),
                    ('workflow_id', models.TextField()),
                    ('workflow_version', models.IntegerField(default=0)),
                    ('shard', models.SmallIntegerField(default=0)),
                    ('runs', models.BigIntegerField(default=0)),
                    ('waiting_gates', models.BigIntegerField(default=0)),
                    ('completed', models.BigIntegerField(default=0)),
                    ('failed', models.BigIntegerField(default=0)),
                    ('cancelled', models.BigIntegerField(default=0)),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.workspace')),
                ],
                options={
                    'indexes': [models.Index(fields=['workspace', 'workflow_id'], name='run_rollup_ws_workflow')],
                    'constraints': [models.UniqueConstraint(fields=('workspace', 'run_day', 'workflow_id', 'workflow_version', 'shard'), name='uniq_run_rollup')],
                },
            ),
            migrations.CreateModel(
                name='ProtectedLabel',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('name', models.CharField(max_length=40)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('created_by', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='protected_labels', to='runs.workspace')),
                ],
                options={
                    'constraints': [models.UniqueConstraint(fields=('workspace', 'name'), name='uniq_protected_label')],
                },
            ),
            migrations.CreateModel(
                name='PromotionRequest',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('label', models.CharField(max_length=40)),
                    ('status', models.CharField(db_index=True, default='pending', max_length=10)),
                    ('note', models.CharField(blank=True, max_length=1000)),
                    ('experiment_ref', models.CharField(blank=True, max_length=200)),
                    ('requested_at', models.DateTimeField(auto_now_add=True)),
                    ('decided_at', models.DateTimeField(blank=True, null=True)),
                    ('decision_note', models.CharField(blank=True, max_length=1000)),
                    ('decided_by', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('requested_by', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('prompt', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='promotions', to='runs.prompt')),
                    ('from_version', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='runs.promptversion')),
                    ('to_version', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.promptversion')),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='promotion_requests', to='runs.workspace')),
                ],
                options={
                    'ordering': ['-requested_at', '-id'],
                    'constraints': [models.UniqueConstraint(condition=models.Q(('status', 'pending')), fields=('prompt', 'label'), name='uniq_pending_promotion')],
                },
            ),
            migrations.CreateModel(
                name='OtelTrace',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('trace_id', models.CharField(max_length=32)),
                    ('session_id', models.CharField(blank=True, default='', max_length=200)),
                    ('title', models.CharField(blank=True, default='', max_length=300)),
                    ('root_status', models.CharField(blank=True, default='', max_length=8)),
                    ('root_ended', models.BooleanField(default=False)),
                    ('last_span_at', models.DateTimeField()),
                    ('ended', models.BooleanField(default=False)),
                    ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='otel_traces', to='runs.run')),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='otel_traces', to='runs.workspace')),
                ],
                options={
                    'indexes': [models.Index(fields=['ended', 'root_ended', 'last_span_at'], name='otel_trace_quiet')],
                    'constraints': [models.UniqueConstraint(fields=('workspace', 'trace_id'), name='uniq_otel_trace_per_workspace')],
                },
            ),
            migrations.CreateModel(
                name='OtelPendingLog',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('trace_id', models.CharField(max_length=32)),
                    ('span_id', models.CharField(max_length=16)),
                    ('record', models.TextField()),
                    ('received_at', models.DateTimeField(auto_now_add=True)),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='otel_pending_logs', to='runs.workspace')),
                ],
                options={
                    'indexes': [models.Index(fields=['workspace', 'trace_id', 'span_id'], name='otel_pending_span'), models.Index(fields=['received_at'], name='otel_pending_age')],
                },
            ),
            migrations.CreateModel(
                name='NotificationPreference',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('gates_to_decide', models.BooleanField(default=False)),
                    ('runs_i_started', models.BooleanField(default=False)),
                    ('updated_at', models.DateTimeField(auto_now=True)),
                    ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='notification_preferences', to='runs.workspace')),
                ],
                options={
                    'indexes': [models.Index(fields=['workspace'], name='notification_pref_ws')],
                    'constraints': [models.UniqueConstraint(fields=('user', 'workspace'), name='uniq_notification_preference')],
                },
            ),
            migrations.CreateModel(
                name='Monitor',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('public_id', models.CharField(max_length=40, unique=True)),
                    ('name', models.CharField(max_length=100)),
                    ('metric', models.CharField(choices=[('cost_hour', 'Cost per hour'), ('cost_day', 'Cost per day (UTC)'), ('latency_p95', 'Latency p95 (seconds)'), ('error_rate', 'Error rate (% of finished runs)'), ('gates_waiting', 'Gates waiting longer than N minutes'), ('decision_p95', 'Time to decision p95 (seconds)'), ('rejection_rate', 'Rejection rate (% of decisions)')], max_length=20)),
                    ('workflow_id', models.CharField(blank=True, default='', max_length=200)),
                    ('model', models.CharField(blank=True, default='', max_length=200)),
                    ('prompt', models.CharField(blank=True, default='', max_length=200)),
                    ('gate', models.CharField(blank=True, default='', max_length=200)),
                    ('minutes', models.IntegerField(default=30)),
                    ('window_days', models.IntegerField(default=1)),
                    ('currency', models.CharField(default='USD', max_length=8)),
                    ('warning', models.FloatField(blank=True, null=True)),
                    ('alert', models.FloatField()),
                    ('margin', models.FloatField(default=0.1)),
                    ('email_owners', models.BooleanField(default=False)),
                    ('enabled', models.BooleanField(default=True)),
                    ('state', models.CharField(choices=[('ok', 'Ok'), ('warning', 'Warning'), ('alert', 'Alert')], default='ok', max_length=10)),
                    ('value', models.FloatField(blank=True, null=True)),
                    ('evaluated_at', models.DateTimeField(blank=True, null=True)),
                    ('changed_at', models.DateTimeField(blank=True, null=True)),
                    ('created_by', models.CharField(blank=True, max_length=200)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('updated_at', models.DateTimeField(auto_now=True)),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='monitors', to='runs.workspace')),
                ],
                options={
                    'ordering': ['created_at', 'id'],
                    'indexes': [models.Index(fields=['workspace', 'enabled'], name='monitor_ws_enabled')],
                },
            ),
            migrations.CreateModel(
                name='MetricRollup',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('run_day', models.DateField()),
                    ('key_hash', models.CharField(max_length=64)),
                    ('workflow_id', models.TextField(default='')),
                    ('shard', models.SmallIntegerField(default=0)),
                    ('kind', models.CharField(max_length=20)),
                    ('label', models.TextField(default='')),
                    ('reviewer', models.TextField(default='')),
                    ('decision', models.TextField(default='')),
                    ('bucket', models.SmallIntegerField(default=0)),
                    ('count', models.BigIntegerField(default=0)),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.workspace')),
                ],
                options={
                    'indexes': [models.Index(fields=['workspace', 'kind', 'run_day'], name='metric_rollup_ws_kind_day')],
                    'constraints': [models.UniqueConstraint(fields=('workspace', 'run_day', 'key_hash'), name='uniq_metric_rollup')],
                },
            ),
            migrations.CreateModel(
                name='Membership',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('role', models.CharField(choices=[('owner', 'Owner'), ('reviewer', 'Reviewer'), ('viewer', 'Viewer')], default='viewer', max_length=16)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to=settings.AUTH_USER_MODEL)),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to='runs.workspace')),
                ],
                options={
                    'constraints': [models.UniqueConstraint(fields=('workspace', 'user'), name='uniq_membership')],
                },
            ),
            migrations.CreateModel(
                name='Invitation',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('invitee', models.CharField(max_length=254)),
                    ('role', models.CharField(choices=[('owner', 'Owner'), ('reviewer', 'Reviewer'), ('viewer', 'Viewer')], default='viewer', max_length=16)),
                    ('status', models.CharField(choices=[('pending', 'Pending'), ('accepted', 'Accepted'), ('declined', 'Declined'), ('revoked', 'Revoked')], default='pending', max_length=16)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('expires_at', models.DateTimeField()),
                    ('responded_at', models.DateTimeField(blank=True, null=True)),
                    ('invited_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='invitations', to='runs.workspace')),
                ],
                options={
                    'ordering': ['-created_at', '-id'],
                    'indexes': [models.Index(fields=['status', 'invitee'], name='invitation_open_idx')],
                },
            ),
            migrations.CreateModel(
                name='ImportJob',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('job_id', models.CharField(max_length=40, unique=True)),
                    ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('succeeded', 'Succeeded'), ('failed', 'Failed')], default='queued', max_length=12)),
                    ('file', models.CharField(max_length=200)),
                    ('size', models.BigIntegerField(default=0)),
                    ('bytes_read', models.BigIntegerField(default=0)),
                    ('events', models.BigIntegerField(default=0)),
                    ('as_new_id', models.BooleanField(default=False)),
                    ('run_id', models.CharField(blank=True, max_length=200)),
                    ('error_code', models.CharField(blank=True, max_length=60)),
                    ('error_message', models.TextField(blank=True)),
                    ('created_by', models.CharField(blank=True, max_length=200)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('started_at', models.DateTimeField(blank=True, null=True)),
                    ('finished_at', models.DateTimeField(blank=True, null=True)),
                    ('task_id', models.CharField(blank=True, max_length=64)),
                    ('attempts', models.IntegerField(default=0)),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='import_jobs', to='runs.workspace')),
                ],
                options={
                    'ordering': ['-created_at', '-id'],
                    'indexes': [models.Index(fields=['workspace', '-created_at'], name='importjob_ws_created')],
                },
            ),
            migrations.CreateModel(
                name='GateVote',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('step_id', models.CharField(max_length=200)),
                    ('gate', models.CharField(max_length=20)),
                    ('checkpoint', models.CharField(blank=True, default='', max_length=200)),
                    ('round', models.CharField(max_length=200)),
                    ('voter', models.CharField(max_length=200)),
                    ('decision', models.CharField(max_length=16)),
                    ('note', models.TextField(blank=True, default='')),
                    ('channel', models.CharField(default='page', max_length=16)),
                    ('metadata', models.JSONField(default=dict)),
                    ('seq', models.IntegerField(blank=True, null=True)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='gate_votes', to='runs.run')),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.workspace')),
                ],
                options={
                    'ordering': ['id'],
                    'constraints': [models.UniqueConstraint(fields=('run', 'step_id', 'gate', 'checkpoint', 'round', 'voter'), name='uniq_gate_vote')],
                },
            ),
            migrations.CreateModel(
                name='GatePolicySetting',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('workflow_id', models.CharField(blank=True, default='', max_length=200)),
                    ('policy', models.JSONField(default=dict)),
                    ('updated_by', models.CharField(blank=True, default='', max_length=200)),
                    ('updated_at', models.DateTimeField(auto_now=True)),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='gate_policies', to='runs.workspace')),
                ],
                options={
                    'ordering': ['workflow_id'],
                    'constraints': [models.UniqueConstraint(fields=('workspace', 'workflow_id'), name='uniq_gate_policy_workflow')],
                },
            ),
            migrations.CreateModel(
                name='GateLink',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('token_hash', models.CharField(max_length=64, unique=True)),
                    ('step_id', models.CharField(max_length=200)),
                    ('gate', models.CharField(max_length=20)),
                    ('checkpoint', models.CharField(blank=True, default='', max_length=200)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('expires_at', models.DateTimeField()),
                    ('used_at', models.DateTimeField(blank=True, null=True)),
                    ('decision', models.CharField(blank=True, default='', max_length=16)),
                    ('delivery', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='runs.delivery')),
                    ('recipient', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.run')),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.workspace')),
                ],
                options={
                    'indexes': [models.Index(fields=['expires_at'], name='gatelink_expires')],
                },
            ),
            migrations.CreateModel(
                name='GateEscalation',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('step_id', models.CharField(max_length=200)),
                    ('gate', models.CharField(max_length=20)),
                    ('checkpoint', models.CharField(blank=True, default='', max_length=200)),
                    ('round', models.CharField(max_length=200)),
                    ('tier', models.IntegerField()),
                    ('recipients', models.IntegerField(default=0)),
                    ('notified_at', models.DateTimeField()),
                    ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='gate_escalations', to='runs.run')),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.workspace')),
                ],
                options={
                    'ordering': ['id'],
                    'constraints': [models.UniqueConstraint(fields=('run', 'step_id', 'gate', 'checkpoint', 'round', 'tier'), name='uniq_gate_escalation')],
                },
            ),
            migrations.CreateModel(
                name='EmailLinkSettings',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('require_sign_in', models.BooleanField(default=False)),
                    ('workspace', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.workspace')),
                ],
            ),
            migrations.CreateModel(
                name='CostRollup',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('calls', models.BigIntegerField(default=0)),
                    ('input_tokens', models.DecimalField(decimal_places=0, default=0, max_digits=32)),
                    ('output_tokens', models.DecimalField(decimal_places=0, default=0, max_digits=32)),
                    ('total_tokens', models.DecimalField(decimal_places=0, default=0, max_digits=32)),
                    ('cached_input_tokens', models.DecimalField(decimal_places=0, default=0, max_digits=32)),
                    ('reasoning_tokens', models.DecimalField(decimal_places=0, default=0, max_digits=32)),
                    ('duration_ms', models.TextField(default='0')),
                    ('cost', models.TextField(default='0')),
                    ('run_day', models.DateField()),
                    ('key_hash', models.CharField(max_length=64)),
                    ('shard', models.SmallIntegerField(default=0)),
                    ('call_day', models.CharField(max_length=10)),
                    ('workflow_id', models.TextField(default='')),
                    ('provider', models.TextField(default='')),
                    ('model', models.TextField(default='')),
                    ('step_id', models.TextField(default='')),
                    ('subject_user', models.TextField(default='')),
                    ('subject_tenant', models.TextField(default='')),
                    ('subject_plan', models.TextField(default='')),
                    ('currency', models.TextField(default='')),
                    ('pricing', models.TextField(default='')),
                    ('pricing_label', models.TextField(default='')),
                    ('prompt', models.TextField(default='')),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.workspace')),
                ],
                options={
                    'constraints': [models.UniqueConstraint(fields=('workspace', 'run_day', 'key_hash'), name='uniq_cost_rollup')],
                },
            ),
            migrations.CreateModel(
                name='CachedResponse',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('key', models.CharField(max_length=64)),
                    ('key_v1', models.CharField(max_length=64)),
                    ('provider', models.CharField(blank=True, max_length=100)),
                    ('model', models.CharField(blank=True, max_length=200)),
                    ('source_run_id', models.CharField(blank=True, max_length=200)),
                    ('request_seq', models.IntegerField(blank=True, null=True)),
                    ('response_seq', models.IntegerField(blank=True, null=True)),
                    ('request', models.TextField()),
                    ('response', models.TextField()),
                    ('response_digest', models.CharField(max_length=64)),
                    ('hits', models.IntegerField(default=0)),
                    ('last_hit_at', models.DateTimeField(blank=True, null=True)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('run', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='cached_responses', to='runs.run')),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='cached_responses', to='runs.workspace')),
                ],
                options={
                    'ordering': ['-created_at'],
                    'indexes': [models.Index(fields=['workspace', 'key'], name='cached_ws_key'), models.Index(fields=['workspace', 'key_v1'], name='cached_ws_key_v1')],
                    'constraints': [models.UniqueConstraint(fields=('workspace', 'key', 'response_digest'), name='uniq_cached_response')],
                },
            ),
            migrations.CreateModel(
                name='BudgetRecord',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('run_id', models.TextField(blank=True, default='')),
                    ('kind', models.CharField(max_length=16)),
                    ('actor', models.TextField(blank=True, default='')),
                    ('message', models.TextField()),
                    ('at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.workspace')),
                ],
                options={
                    'indexes': [models.Index(fields=['workspace', '-at'], name='budget_record_ws_at')],
                },
            ),
            migrations.CreateModel(
                name='WorkspaceBudget',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('monthly_cap', models.DecimalField(blank=True, decimal_places=6, max_digits=14, null=True)),
                    ('run_default', models.DecimalField(blank=True, decimal_places=6, max_digits=14, null=True)),
                    ('currency', models.CharField(default='USD', max_length=8)),
                    ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('updated_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
                    ('workspace', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.workspace')),
                ],
            ),
            migrations.CreateModel(
                name='MonitorChange',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('at', models.DateTimeField()),
                    ('from_state', models.CharField(max_length=10)),
                    ('to_state', models.CharField(max_length=10)),
                    ('value', models.FloatField(blank=True, null=True)),
                    ('range_from', models.DateField()),
                    ('range_to', models.DateField()),
                    ('deliveries', models.IntegerField(default=0)),
                    ('monitor', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='changes', to='runs.monitor')),
                ],
                options={
                    'ordering': ['-at', '-id'],
                    'indexes': [models.Index(fields=['monitor', '-at', '-id'], name='monitor_change_recent')],
                },
            ),
            migrations.CreateModel(
                name='MonitorSample',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('at', models.DateTimeField()),
                    ('day', models.DateField()),
                    ('total', models.TextField(default='0')),
                    ('monitor', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.monitor')),
                ],
                options={
                    'indexes': [models.Index(fields=['monitor', 'at'], name='monitor_sample_at')],
                },
            ),
        ),
        migrations.RunPython(create_search, drop_search),
    ]
