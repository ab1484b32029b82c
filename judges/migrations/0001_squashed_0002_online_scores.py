"""Every migration of judges up to 0002_online_scores, squashed (issue 53): a fresh database applies this one;
a database partway through applies the rest of the old ones (still here, named in ``replaces``)."""

import django.db.models.deletion
from decimal import Decimal
from django.db import migrations, models

from runs.migrations._operations import CreateModels


class Migration(migrations.Migration):

    initial = True

    replaces = [
        ('judges', '0001_judges'),
        ('judges', '0002_online_scores'),
    ]

    dependencies = [
        ('runs', '0001_squashed_0030_slack_links'),
    ]

    operations = [
        CreateModels(
            migrations.CreateModel(
                name='GateJudge',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('judge_id', models.CharField(max_length=40, unique=True)),
                    ('name', models.CharField(max_length=100)),
                    ('version', models.PositiveIntegerField(default=1)),
                    ('kind', models.CharField(choices=[('llm', 'LLM judge'), ('rule', 'Code rule')], max_length=8)),
                    ('workflow_id', models.CharField(max_length=200)),
                    ('step_id', models.CharField(max_length=200)),
                    ('gate', models.CharField(max_length=20)),
                    ('checkpoint', models.CharField(blank=True, default='', max_length=200)),
                    ('config', models.JSONField(default=dict)),
                    ('enabled', models.BooleanField(default=True)),
                    ('show_to_reviewers', models.BooleanField(default=False)),
                    ('budget', models.DecimalField(blank=True, decimal_places=6, max_digits=12, null=True)),
                    ('spent', models.DecimalField(decimal_places=6, default=Decimal('0'), max_digits=12)),
                    ('budget_said', models.BooleanField(default=False)),
                    ('delegation', models.CharField(choices=[('off', 'Off (shadow only)'), ('approve', 'May approve'), ('both', 'May approve and reject')], default='off', max_length=8)),
                    ('min_confidence', models.FloatField(default=0.9)),
                    ('kappa_floor', models.FloatField(default=0.8)),
                    ('audit_percent', models.FloatField(default=10.0)),
                    ('window_days', models.PositiveIntegerField(default=30)),
                    ('online_percent', models.FloatField(default=0.0)),
                    ('delegated_at', models.DateTimeField(blank=True, null=True)),
                    ('suspended_at', models.DateTimeField(blank=True, null=True)),
                    ('suspended_reason', models.CharField(blank=True, default='', max_length=500)),
                    ('created_by', models.CharField(blank=True, default='', max_length=200)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.workspace')),
                ],
                options={
                    'ordering': ['name', '-version'],
                    'indexes': [models.Index(fields=['workspace', 'workflow_id', 'enabled'], name='judge_ws_wf')],
                    'constraints': [models.UniqueConstraint(fields=('workspace', 'name', 'version'), name='judge_name_version')],
                },
            ),
            migrations.CreateModel(
                name='OnlineScore',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('status', models.CharField(choices=[('pending', 'Pending'), ('proposed', 'Proposed'), ('over_budget', 'Over Budget'), ('failed', 'Failed')], default='pending', max_length=12)),
                    ('decision', models.CharField(blank=True, default='', max_length=10)),
                    ('confidence', models.FloatField(blank=True, null=True)),
                    ('rationale', models.TextField(blank=True, default='')),
                    ('error', models.CharField(blank=True, default='', max_length=500)),
                    ('cost', models.DecimalField(decimal_places=6, default=Decimal('0'), max_digits=12)),
                    ('judge_run_id', models.CharField(blank=True, default='', max_length=200)),
                    ('annotation_seq', models.PositiveIntegerField(blank=True, null=True)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('judge', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='scores', to='judges.gatejudge')),
                    ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.run')),
                ],
                options={
                    'ordering': ['-pk'],
                    'constraints': [models.UniqueConstraint(fields=('judge', 'run'), name='online_score_unique')],
                },
            ),
            migrations.CreateModel(
                name='Proposal',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('gate_key', models.CharField(max_length=500)),
                    ('step_id', models.CharField(max_length=200)),
                    ('gate', models.CharField(max_length=20)),
                    ('checkpoint', models.CharField(blank=True, default='', max_length=200)),
                    ('after_seq', models.PositiveIntegerField()),
                    ('status', models.CharField(choices=[('pending', 'Pending'), ('proposed', 'Proposed'), ('over_budget', 'Over Budget'), ('failed', 'Failed')], default='pending', max_length=12)),
                    ('decision', models.CharField(blank=True, default='', max_length=10)),
                    ('confidence', models.FloatField(blank=True, null=True)),
                    ('rationale', models.TextField(blank=True, default='')),
                    ('error', models.CharField(blank=True, default='', max_length=500)),
                    ('cost', models.DecimalField(decimal_places=6, default=Decimal('0'), max_digits=12)),
                    ('judge_run_id', models.CharField(blank=True, default='', max_length=200)),
                    ('latency_ms', models.FloatField(blank=True, null=True)),
                    ('annotation_seq', models.PositiveIntegerField(blank=True, null=True)),
                    ('audit', models.BooleanField(default=False)),
                    ('delegated', models.BooleanField(default=False)),
                    ('policy', models.JSONField(blank=True, default=dict)),
                    ('outcome', models.CharField(blank=True, default='', max_length=10)),
                    ('outcome_by', models.CharField(blank=True, default='', max_length=200)),
                    ('outcome_seq', models.PositiveIntegerField(blank=True, null=True)),
                    ('decided_at', models.DateTimeField(blank=True, null=True)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('judge', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='proposals', to='judges.gatejudge')),
                    ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.run')),
                ],
                options={
                    'ordering': ['-pk'],
                    'indexes': [models.Index(fields=['run', 'outcome'], name='proposal_run_outcome'), models.Index(fields=['judge', 'decided_at'], name='proposal_judge_decided')],
                    'constraints': [models.UniqueConstraint(fields=('judge', 'run', 'gate_key'), name='proposal_unique')],
                },
            ),
        ),
    ]
