"""Every migration of review up to 0002_queue_default_dataset, squashed (issue 53): a fresh database applies this one;
a database partway through applies the rest of the old ones (still here, named in ``replaces``)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from runs.migrations._operations import CreateModels


class Migration(migrations.Migration):

    initial = True

    replaces = [
        ('review', '0001_annotation_queues'),
        ('review', '0002_queue_default_dataset'),
    ]

    dependencies = [
        ('runs', '0001_squashed_0030_slack_links'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        CreateModels(
            migrations.CreateModel(
                name='Queue',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('queue_id', models.CharField(max_length=40, unique=True)),
                    ('name', models.CharField(max_length=200)),
                    ('instructions', models.TextField(blank=True, default='')),
                    ('reviews_per_item', models.PositiveSmallIntegerField(default=1)),
                    ('reservation_seconds', models.PositiveIntegerField(default=600)),
                    ('blind', models.BooleanField(default=True)),
                    ('rules', models.JSONField(blank=True, default=dict)),
                    ('default_dataset', models.CharField(blank=True, default='', max_length=60)),
                    ('created_by', models.CharField(blank=True, default='', max_length=200)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('reviewers', models.ManyToManyField(blank=True, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='review_queues', to='runs.workspace')),
                ],
                options={
                    'ordering': ['name'],
                    'constraints': [models.UniqueConstraint(fields=('workspace', 'name'), name='review_queue_name_unique')],
                },
            ),
            migrations.CreateModel(
                name='Item',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('item_id', models.CharField(max_length=40, unique=True)),
                    ('kind', models.CharField(choices=[('run', 'Run'), ('event', 'Event'), ('step', 'Step')], default='run', max_length=8)),
                    ('seq', models.PositiveIntegerField(default=0)),
                    ('step_id', models.CharField(blank=True, default='', max_length=200)),
                    ('added_by', models.CharField(blank=True, default='', max_length=200)),
                    ('added_at', models.DateTimeField(auto_now_add=True)),
                    ('completed_reviews', models.PositiveSmallIntegerField(default=0)),
                    ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.run')),
                    ('queue', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='items', to='review.queue')),
                ],
                options={
                    'ordering': ['pk'],
                    'constraints': [models.UniqueConstraint(fields=('queue', 'run', 'kind', 'seq', 'step_id'), name='review_item_unique')],
                },
            ),
            migrations.CreateModel(
                name='ScoreConfig',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('name', models.CharField(max_length=100)),
                    ('data_type', models.CharField(choices=[('NUMERIC', 'Numeric'), ('CATEGORICAL', 'Categorical'), ('BOOLEAN', 'Boolean')], max_length=12)),
                    ('min_value', models.FloatField(blank=True, null=True)),
                    ('max_value', models.FloatField(blank=True, null=True)),
                    ('categories', models.JSONField(blank=True, default=list)),
                    ('description', models.TextField(blank=True, default='')),
                    ('is_archived', models.BooleanField(default=False)),
                    ('position', models.PositiveSmallIntegerField(default=0)),
                    ('queue', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='score_configs', to='review.queue')),
                ],
                options={
                    'ordering': ['position', 'pk'],
                    'constraints': [models.UniqueConstraint(fields=('queue', 'name'), name='review_config_name_unique')],
                },
            ),
            migrations.CreateModel(
                name='Score',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('queue_name', models.CharField(max_length=200)),
                    ('name', models.CharField(max_length=100)),
                    ('data_type', models.CharField(choices=[('NUMERIC', 'Numeric'), ('CATEGORICAL', 'Categorical'), ('BOOLEAN', 'Boolean')], max_length=12)),
                    ('value', models.FloatField(blank=True, null=True)),
                    ('string_value', models.CharField(blank=True, default='', max_length=200)),
                    ('comment', models.TextField(blank=True, default='')),
                    ('kind', models.CharField(choices=[('run', 'Run'), ('event', 'Event'), ('step', 'Step')], default='run', max_length=8)),
                    ('seq', models.PositiveIntegerField(default=0)),
                    ('step_id', models.CharField(blank=True, default='', max_length=200)),
                    ('reviewer_name', models.CharField(max_length=200)),
                    ('created_at', models.DateTimeField()),
                    ('annotation_seq', models.PositiveIntegerField(blank=True, null=True)),
                    ('item', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='scores', to='review.item')),
                    ('queue', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='scores', to='review.queue')),
                    ('reviewer', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.run')),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.workspace')),
                    ('config', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='scores', to='review.scoreconfig')),
                ],
                options={
                    'ordering': ['pk'],
                    'indexes': [models.Index(fields=['queue', 'name'], name='review_score_queue_name')],
                },
            ),
            migrations.CreateModel(
                name='Claim',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('claimed_at', models.DateTimeField()),
                    ('expires_at', models.DateTimeField()),
                    ('completed_at', models.DateTimeField(blank=True, null=True)),
                    ('skipped', models.BooleanField(default=False)),
                    ('reviewer', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('item', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='claims', to='review.item')),
                ],
                options={
                    'indexes': [models.Index(fields=['item', 'expires_at'], name='review_claim_item_exp')],
                    'constraints': [models.UniqueConstraint(fields=('item', 'reviewer'), name='review_claim_unique')],
                },
            ),
        ),
    ]
