"""Contacts, lists, segments, suppressions and imports move here from campaigns, state only:
the tables campaigns' migrations created are taken over as they are (0002 renames them)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("campaigns", "0004_campaign_audience_size"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.CreateModel(
                name='ContactImport',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('path', models.CharField(max_length=1000)),
                    ('fingerprint', models.CharField(max_length=200, unique=True)),
                    ('list_name', models.CharField(blank=True, default='', max_length=200)),
                    ('rows_done', models.BigIntegerField(default=0)),
                    ('finished', models.BooleanField(default=False)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('updated_at', models.DateTimeField(auto_now=True)),
                ],
                options={
                    'db_table': 'campaigns_contactimport',
                },
            ),
            migrations.CreateModel(
                name='Segment',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('name', models.CharField(max_length=200, unique=True)),
                    ('definition', models.JSONField(default=dict)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                ],
                options={
                    'db_table': 'campaigns_segment',
                },
            ),
            migrations.CreateModel(
                name='Suppression',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('email', models.EmailField(max_length=254, unique=True)),
                    ('reason', models.CharField(choices=[('hard_bounce', 'Hard Bounce'), ('complaint', 'Complaint'), ('unsubscribe', 'Unsubscribe'), ('manual', 'Manual')], default='manual', max_length=20)),
                    ('source', models.CharField(blank=True, default='', max_length=100)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                ],
                options={
                    'db_table': 'campaigns_suppression',
                },
            ),
            migrations.CreateModel(
                name='Contact',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('email', models.EmailField(max_length=254, unique=True)),
                    ('name', models.CharField(blank=True, default='', max_length=200)),
                    ('timezone', models.CharField(blank=True, default='', max_length=64)),
                    ('locale', models.CharField(blank=True, default='', max_length=16)),
                    ('attributes', models.JSONField(blank=True, default=dict)),
                    ('subscribed', models.BooleanField(default=True)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('updated_at', models.DateTimeField(auto_now=True)),
                ],
                options={
                    'db_table': 'campaigns_contact',
                    'indexes': [models.Index(fields=['created_at'], name='contact_created_idx')],
                },
            ),
            migrations.CreateModel(
                name='ContactList',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('name', models.CharField(max_length=200, unique=True)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('contacts', models.ManyToManyField(blank=True, related_name='lists', to='audience.contact')),
                ],
                options={
                    'db_table': 'campaigns_contactlist',
                },
            ),
        ]),
    ]
