"""Every migration of playground up to 0010_cache_write_1h_price, squashed (issue 53).

A fresh database applies this one; a database partway through applies the rest of the old ones
(still here, named in ``replaces``). Of the old data migrations only 0002's seed rows matter on a
fresh database (0006 and 0008 rewrite rows a fresh database does not have): the global Anthropic
and OpenAI providers reading their keys from the environment, and a small catalogue with list
prices per million tokens (editable in the price table; a price left empty is shown as unknown).
"""

from decimal import Decimal

import django.db.models.deletion
import uuid
from django.conf import settings
from django.db import migrations, models

from runs.migrations._operations import CreateModels


ANTHROPIC = [
    # model id, name, window, input, output, cache read, cache write, default
    ("claude-sonnet-4-6", "Claude Sonnet 4.6", 200_000, "3", "15", "0.30", "3.75", True),
    ("claude-haiku-4-5", "Claude Haiku 4.5", 200_000, "1", "5", "0.10", "1.25", False),
    ("claude-opus-4-5", "Claude Opus 4.5", 200_000, "5", "25", "0.50", "6.25", False),
]
OPENAI = [
    ("gpt-5", "GPT-5", 400_000, "1.25", "10", "0.125"),
    ("gpt-5-mini", "GPT-5 mini", 400_000, "0.25", "2", "0.025"),
]


def create_global_defaults(apps, schema_editor):
    """0002_global_defaults' rows, as that migration wrote them."""
    Provider = apps.get_model("playground", "ProviderConfig")
    Model = apps.get_model("playground", "ModelEntry")
    anthropic = Provider.objects.create(name="Anthropic", kind="anthropic", api_key_env="ANTHROPIC_API_KEY")
    openai = Provider.objects.create(name="OpenAI", kind="openai", api_key_env="OPENAI_API_KEY")
    for pos, (mid, name, window, inp, out, read, write, default) in enumerate(ANTHROPIC):
        Model.objects.create(
            provider=anthropic, model_id=mid, display_name=name, context_window=window, supports_thinking=True,
            supports_citations=True, supports_pdf=True, is_default=default, position=pos,
            input_price=Decimal(inp), output_price=Decimal(out), cache_read_price=Decimal(read),
            cache_write_price=Decimal(write),
        )
    for pos, (mid, name, window, inp, out, read) in enumerate(OPENAI, start=10):
        Model.objects.create(
            provider=openai, model_id=mid, display_name=name, context_window=window, supports_thinking=True,
            supports_pdf=True, max_tokens_param="max_completion_tokens", position=pos,
            input_price=Decimal(inp), output_price=Decimal(out), cache_read_price=Decimal(read),
        )


class Migration(migrations.Migration):

    initial = True

    replaces = [
        ('playground', '0001_initial'),
        ('playground', '0002_global_defaults'),
        ('playground', '0003_execution_cancelled'),
        ('playground', '0004_execution_conversation'),
        ('playground', '0005_user_playground'),
        ('playground', '0006_provider_keys_operator_only'),
        ('playground', '0007_execution_incomplete'),
        ('playground', '0008_saved_prompts_become_versions'),
        ('playground', '0009_operation_defaults'),
        ('playground', '0010_cache_write_1h_price'),
    ]

    dependencies = [
        ('runs', '0001_squashed_0030_slack_links'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        CreateModels(
            migrations.CreateModel(
                name='ProviderConfig',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('name', models.CharField(max_length=100)),
                    ('kind', models.CharField(choices=[('anthropic', 'Anthropic Messages'), ('openai', 'OpenAI Chat Completions (or compatible)')], max_length=16)),
                    ('base_url', models.URLField(blank=True, help_text="Empty: the provider's own endpoint.")),
                    ('api_key_encrypted', models.TextField(blank=True)),
                    ('api_key_hint', models.CharField(blank=True, max_length=16)),
                    ('api_key_env', models.CharField(blank=True, help_text='Global (operator) providers only: the environment variable holding the key. It is only sent to the endpoints the operator lists for it (setting PLAYGROUND_OPERATOR_KEYS).', max_length=100)),
                    ('key_required', models.BooleanField(default=True)),
                    ('timeout_seconds', models.FloatField(default=600.0)),
                    ('max_retries', models.IntegerField(default=2)),
                    ('is_enabled', models.BooleanField(default=True)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('updated_at', models.DateTimeField(auto_now=True)),
                    ('workspace', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='playground_providers', to='runs.workspace')),
                ],
                options={
                    'ordering': ['workspace_id', 'name'],
                    'constraints': [models.UniqueConstraint(fields=('workspace', 'name'), name='uniq_provider_name'), models.UniqueConstraint(condition=models.Q(('workspace__isnull', True)), fields=('name',), name='uniq_global_provider_name'), models.CheckConstraint(condition=models.Q(('workspace__isnull', True), ('api_key_env', ''), _connector='OR'), name='provider_env_key_operator_only')],
                },
            ),
            migrations.CreateModel(
                name='ModelEntry',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('model_id', models.CharField(help_text='The name the API knows the model by.', max_length=200)),
                    ('display_name', models.CharField(max_length=200)),
                    ('context_window', models.IntegerField(blank=True, null=True)),
                    ('supports_thinking', models.BooleanField(default=False)),
                    ('supports_citations', models.BooleanField(default=False)),
                    ('supports_pdf', models.BooleanField(default=False)),
                    ('max_tokens_param', models.CharField(default='max_tokens', max_length=32)),
                    ('is_default', models.BooleanField(default=False)),
                    ('is_active', models.BooleanField(default=True)),
                    ('position', models.IntegerField(default=0)),
                    ('currency', models.CharField(default='USD', max_length=8)),
                    ('input_price', models.DecimalField(blank=True, decimal_places=6, max_digits=12, null=True)),
                    ('output_price', models.DecimalField(blank=True, decimal_places=6, max_digits=12, null=True)),
                    ('cache_read_price', models.DecimalField(blank=True, decimal_places=6, max_digits=12, null=True)),
                    ('cache_write_price', models.DecimalField(blank=True, decimal_places=6, max_digits=12, null=True)),
                    ('cache_write_1h_price', models.DecimalField(blank=True, decimal_places=6, max_digits=12, null=True)),
                    ('workspace', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='playground_models', to='runs.workspace')),
                    ('provider', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='models', to='playground.providerconfig')),
                ],
                options={
                    'ordering': ['position', 'display_name'],
                },
            ),
            migrations.CreateModel(
                name='SavedPrompt',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('name', models.CharField(max_length=200)),
                    ('operation_type', models.CharField(default='generic', max_length=32)),
                    ('system_prompt', models.TextField(blank=True)),
                    ('prompt', models.TextField(blank=True)),
                    ('options', models.JSONField(blank=True, default=dict)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('updated_at', models.DateTimeField(auto_now=True)),
                    ('created_by', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('model', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='playground.modelentry')),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='playground_prompts', to='runs.workspace')),
                ],
                options={
                    'ordering': ['name'],
                    'constraints': [models.UniqueConstraint(fields=('workspace', 'name'), name='uniq_saved_prompt')],
                },
            ),
            migrations.CreateModel(
                name='UserPlayground',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('updated_at', models.DateTimeField(auto_now=True)),
                    ('last_model', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='playground.modelentry')),
                    ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.workspace')),
                ],
                options={
                    'constraints': [models.UniqueConstraint(fields=('user', 'workspace'), name='uniq_user_playground')],
                },
            ),
            migrations.CreateModel(
                name='WorkspacePlayground',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('default_model', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='playground.modelentry')),
                    ('hidden_models', models.ManyToManyField(blank=True, related_name='+', to='playground.modelentry')),
                    ('workspace', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='playground', to='runs.workspace')),
                ],
            ),
            migrations.CreateModel(
                name='Execution',
                fields=[
                    ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                    ('provider_kind', models.CharField(choices=[('anthropic', 'Anthropic Messages'), ('openai', 'OpenAI Chat Completions (or compatible)')], max_length=16)),
                    ('model_name', models.CharField(max_length=200)),
                    ('status', models.CharField(choices=[('pending', 'Pending'), ('processing', 'Processing'), ('completed', 'Completed'), ('failed', 'Failed'), ('incomplete', 'Incomplete'), ('cancelled', 'Cancelled')], db_index=True, default='pending', max_length=16)),
                    ('operation_type', models.CharField(default='generic', max_length=32)),
                    ('compare_group', models.CharField(blank=True, db_index=True, max_length=64)),
                    ('conversation_id', models.CharField(blank=True, db_index=True, max_length=32)),
                    ('parent_run_id', models.CharField(blank=True, max_length=200)),
                    ('label', models.CharField(blank=True, max_length=40)),
                    ('run_id', models.CharField(blank=True, max_length=200)),
                    ('correlation_id', models.CharField(blank=True, max_length=200)),
                    ('request', models.TextField()),
                    ('user_content', models.TextField()),
                    ('flags', models.JSONField(default=dict)),
                    ('notes', models.JSONField(default=list)),
                    ('output_tool', models.CharField(blank=True, max_length=100)),
                    ('cache_keys', models.JSONField(default=list)),
                    ('partial_text', models.TextField(blank=True)),
                    ('partial_thinking', models.TextField(blank=True)),
                    ('content', models.TextField(blank=True)),
                    ('response_text', models.TextField(blank=True)),
                    ('thinking', models.TextField(blank=True)),
                    ('citations', models.JSONField(default=list)),
                    ('tool_calls', models.JSONField(default=list)),
                    ('structured_output', models.JSONField(blank=True, null=True)),
                    ('structured_error', models.TextField(blank=True)),
                    ('usage', models.JSONField(default=dict)),
                    ('cost', models.DecimalField(blank=True, decimal_places=9, max_digits=18, null=True)),
                    ('currency', models.CharField(blank=True, max_length=8)),
                    ('stop_reason', models.CharField(blank=True, max_length=40)),
                    ('error_code', models.CharField(blank=True, max_length=40)),
                    ('error_message', models.TextField(blank=True)),
                    ('error_status', models.IntegerField(blank=True, null=True)),
                    ('provider_error_type', models.CharField(blank=True, max_length=100)),
                    ('duration_ms', models.IntegerField(blank=True, null=True)),
                    ('worker_id', models.CharField(blank=True, max_length=100)),
                    ('heartbeat_at', models.DateTimeField(blank=True, null=True)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('started_at', models.DateTimeField(blank=True, null=True)),
                    ('finished_at', models.DateTimeField(blank=True, null=True)),
                    ('updated_at', models.DateTimeField(auto_now=True)),
                    ('user', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='playground_executions', to='runs.workspace')),
                    ('model', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='executions', to='playground.modelentry')),
                ],
                options={
                    'ordering': ['-created_at'],
                    'indexes': [models.Index(fields=['status', 'heartbeat_at'], name='exec_status_heartbeat')],
                },
            ),
            migrations.CreateModel(
                name='OperationDefaults',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('operation_type', models.CharField(max_length=32)),
                    ('temperature', models.FloatField(blank=True, null=True)),
                    ('thinking', models.BooleanField(blank=True, null=True)),
                    ('citations', models.BooleanField(blank=True, null=True)),
                    ('updated_at', models.DateTimeField(auto_now=True)),
                    ('workspace', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='playground_operation_defaults', to='runs.workspace')),
                ],
                options={
                    'ordering': ['operation_type'],
                    'constraints': [models.UniqueConstraint(fields=('workspace', 'operation_type'), name='uniq_operation_defaults'), models.UniqueConstraint(condition=models.Q(('workspace__isnull', True)), fields=('operation_type',), name='uniq_global_operation_defaults')],
                },
            ),
        ),
        # Backwards: nothing to delete, the tables go next (deleting the rows first leaves PostgreSQL
        # deferred foreign key checks pending on tables it is then asked to drop).
        migrations.RunPython(create_global_defaults, migrations.RunPython.noop),
    ]
