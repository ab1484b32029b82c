"""Every migration of evals up to 0002_experiment_task, squashed (issue 53): a fresh database applies this one;
a database partway through applies the rest of the old ones (still here, named in ``replaces``)."""

import django.db.models.deletion
from django.db import migrations, models

from runs.migrations._operations import CreateModels


class Migration(migrations.Migration):

    initial = True

    replaces = [
        ('evals', '0001_datasets_and_experiments'),
        ('evals', '0002_experiment_task'),
    ]

    dependencies = [
        ('runs', '0001_squashed_0030_slack_links'),
    ]

    operations = [
        CreateModels(
            migrations.CreateModel(
                name='Dataset',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('public_id', models.CharField(max_length=40, unique=True)),
                    ('name', models.CharField(max_length=200)),
                    ('description', models.TextField(blank=True)),
                    ('input_schema', models.JSONField(blank=True, null=True)),
                    ('expected_schema', models.JSONField(blank=True, null=True)),
                    ('revision', models.IntegerField(default=0)),
                    ('created_by', models.CharField(blank=True, max_length=200)),
                    ('created_at', models.DateTimeField()),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='datasets', to='runs.workspace')),
                ],
                options={
                    'ordering': ['-created_at', '-pk'],
                    'constraints': [models.UniqueConstraint(fields=('workspace', 'name'), name='uniq_dataset_name')],
                },
            ),
            migrations.CreateModel(
                name='DatasetItemRevision',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('revision', models.IntegerField()),
                    ('item_key', models.CharField(max_length=200)),
                    ('op', models.CharField(choices=[('put', 'Put'), ('delete', 'Delete')], max_length=8)),
                    ('body', models.TextField(blank=True)),
                    ('source_run_id', models.CharField(blank=True, max_length=200)),
                    ('source_event_id', models.CharField(blank=True, max_length=200)),
                    ('source_seq', models.IntegerField(blank=True, null=True)),
                    ('source_key', models.CharField(blank=True, max_length=500)),
                    ('actor', models.CharField(blank=True, max_length=200)),
                    ('created_at', models.DateTimeField()),
                    ('dataset', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='item_revisions', to='evals.dataset')),
                ],
                options={
                    'ordering': ['revision', 'item_key'],
                    'indexes': [models.Index(fields=['dataset', 'revision'], name='dsitem_rev'), models.Index(fields=['dataset', 'source_key'], name='dsitem_source')],
                    'constraints': [models.UniqueConstraint(fields=('dataset', 'item_key', 'revision'), name='uniq_item_revision')],
                },
            ),
            migrations.CreateModel(
                name='Experiment',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('public_id', models.CharField(max_length=40, unique=True)),
                    ('as_of_revision', models.IntegerField()),
                    ('name', models.CharField(max_length=200)),
                    ('change', models.JSONField(blank=True, default=dict)),
                    ('from_step_id', models.CharField(blank=True, max_length=200)),
                    ('evaluator', models.JSONField(blank=True, default=dict)),
                    ('status', models.CharField(choices=[('pending', 'Pending'), ('running', 'Running'), ('completed', 'Completed'), ('failed', 'Failed')], default='pending', max_length=16)),
                    ('summary', models.JSONField(blank=True, default=dict)),
                    ('error', models.TextField(blank=True)),
                    ('rescored', models.IntegerField(default=0)),
                    ('created_by', models.CharField(blank=True, max_length=200)),
                    ('created_at', models.DateTimeField()),
                    ('finished_at', models.DateTimeField(blank=True, null=True)),
                    ('task_id', models.CharField(blank=True, max_length=64)),
                    ('attempts', models.IntegerField(default=0)),
                    ('baseline', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='evals.experiment')),
                    ('dataset', models.ForeignKey(on_delete=django.db.models.deletion.RESTRICT, related_name='experiments', to='evals.dataset')),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='experiments', to='runs.workspace')),
                ],
                options={
                    'ordering': ['-created_at', '-pk'],
                },
            ),
            migrations.CreateModel(
                name='ExperimentItem',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('item_key', models.CharField(max_length=200)),
                    ('source_run_id', models.CharField(blank=True, max_length=200)),
                    ('run_id_text', models.CharField(blank=True, max_length=200)),
                    ('status', models.CharField(choices=[('pending', 'Pending'), ('running', 'Running'), ('completed', 'Completed'), ('waiting', 'Waiting'), ('failed', 'Failed')], default='pending', max_length=16)),
                    ('output', models.TextField(blank=True)),
                    ('score', models.FloatField(blank=True, null=True)),
                    ('score_detail', models.JSONField(blank=True, default=dict)),
                    ('provider_calls', models.IntegerField(default=0)),
                    ('cache_hits', models.IntegerField(default=0)),
                    ('tokens', models.BigIntegerField(default=0)),
                    ('cost', models.DecimalField(decimal_places=8, default=0, max_digits=18)),
                    ('source_cost', models.DecimalField(decimal_places=8, default=0, max_digits=18)),
                    ('latency_ms', models.IntegerField(blank=True, null=True)),
                    ('first_divergence_seq', models.IntegerField(blank=True, null=True)),
                    ('error', models.TextField(blank=True)),
                    ('experiment', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='items', to='evals.experiment')),
                    ('run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='runs.run')),
                ],
                options={
                    'ordering': ['item_key'],
                    'constraints': [models.UniqueConstraint(fields=('experiment', 'item_key'), name='uniq_experiment_item')],
                },
            ),
        ),
    ]
