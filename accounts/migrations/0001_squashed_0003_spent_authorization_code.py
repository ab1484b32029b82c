"""Every migration of accounts up to 0003_spent_authorization_code, squashed (issue 53): a fresh database applies this one;
a database partway through applies the rest of the old ones (still here, named in ``replaces``)."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

from runs.migrations._operations import CreateModels


class Migration(migrations.Migration):

    initial = True

    replaces = [
        ('accounts', '0001_initial'),
        ('accounts', '0002_token_keyset_index'),
        ('accounts', '0003_spent_authorization_code'),
    ]

    dependencies = [
        ('runs', '0001_squashed_0030_slack_links'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        CreateModels(
            migrations.CreateModel(
                name='SpentAuthorizationCode',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('code_sha256', models.CharField(max_length=64, unique=True)),
                    ('client_id', models.CharField(max_length=100)),
                    ('access_token_id', models.BigIntegerField(null=True)),
                    ('refresh_token_id', models.BigIntegerField(null=True)),
                    ('spent_at', models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                ],
            ),
            migrations.CreateModel(
                name='ApiToken',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('key_id', models.CharField(max_length=32, unique=True)),
                    ('secret_hash', models.CharField(max_length=64)),
                    ('name', models.CharField(max_length=200)),
                    ('scopes', models.JSONField(default=list)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('expires_at', models.DateTimeField(blank=True, null=True)),
                    ('revoked_at', models.DateTimeField(blank=True, null=True)),
                    ('last_used_at', models.DateTimeField(blank=True, null=True)),
                    ('rate_limit', models.PositiveIntegerField(blank=True, null=True)),
                    ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to='runs.workspace')),
                ],
                options={
                    'ordering': ['-created_at', '-id'],
                    'indexes': [models.Index(fields=['workspace', '-created_at', '-id'], name='token_ws_created')],
                },
            ),
            migrations.CreateModel(
                name='IdempotencyRecord',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('key', models.CharField(max_length=255)),
                    ('fingerprint', models.CharField(max_length=64)),
                    ('actor', models.CharField(blank=True, default='', max_length=200)),
                    ('status_code', models.PositiveSmallIntegerField(blank=True, null=True)),
                    ('content_type', models.CharField(blank=True, default='', max_length=100)),
                    ('body', models.BinaryField(default=b'')),
                    ('headers', models.JSONField(blank=True, default=dict)),
                    ('created_at', models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                    ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='idempotency_records', to='runs.workspace')),
                ],
                options={
                    'constraints': [models.UniqueConstraint(fields=('workspace', 'key'), name='uniq_idempotency_key')],
                },
            ),
        ),
    ]
