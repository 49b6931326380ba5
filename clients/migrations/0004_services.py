"""Services above their keys (issue 27, decision 102): each API client becomes a service with the
client's id, name, rate limits and scopes (plus `keys`, the new scope, unless it held admin),
holding that client's row as its first (live) key. The key keeps its scopes; its rate limits
move to the service, which its keys share. No owner column of any table is rewritten: the
service's id is the client's, so every `client_id` already names its service."""

import clients.rates
import clients.scopes
import django.db.models.deletion
from django.db import migrations, models

import clients.models


def services_from_clients(apps, schema_editor):
    api_client = apps.get_model("clients", "ApiClient")
    service = apps.get_model("clients", "Service")
    for client in api_client.objects.order_by("created").iterator():
        scopes = list(client.scopes or [])
        if "admin" not in scopes and "keys" not in scopes:
            scopes.append("keys")
        service.objects.create(id=client.id, name=client.name, scopes=scopes,
                               rate_limit=client.rate_limit,
                               endpoint_rate_limits=client.endpoint_rate_limits or {})
        # auto_now_add set `created` to now: the service is as old as its client.
        service.objects.filter(pk=client.id).update(created=client.created)
        api_client.objects.filter(pk=client.pk).update(
            service_id=client.id, rate_limit="", endpoint_rate_limits={},
            created_by="migrated from the API client")


def clients_from_services(apps, schema_editor):
    """Backwards: the rate limits go back to the keys (each service had one key then)."""
    api_client = apps.get_model("clients", "ApiClient")
    for key in api_client.objects.select_related("service").iterator():
        api_client.objects.filter(pk=key.pk).update(
            rate_limit=key.service.rate_limit, endpoint_rate_limits=key.service.endpoint_rate_limits)


class Migration(migrations.Migration):

    # The tenancy migrations' owner backfill (clients/legacy_owner.py) writes API clients as they
    # were: those migrations say `run_before` this one (a lower app never depends on a higher).
    dependencies = [
        ('clients', '0003_idempotency_record'),
    ]

    operations = [
        migrations.CreateModel(
            name='Service',
            fields=[
                ('id', models.CharField(default=clients.models.new_service_id, editable=False, max_length=150, primary_key=True, serialize=False)),
                ('name', models.CharField(max_length=100)),
                ('scopes', models.JSONField(blank=True, default=clients.scopes.default_scopes, help_text="What the service's keys may be given: send, campaigns, schedules, analytics (read-only), keys, admin")),
                ('rate_limit', models.CharField(blank=True, default='', help_text='Requests per service and endpoint class, shared by all its keys, e.g. 100/min; empty: the default.', max_length=20, validators=[clients.rates.validate_rate])),
                ('endpoint_rate_limits', models.JSONField(blank=True, default=dict, help_text='Overrides per endpoint class, e.g. {"send": "10/s", "templates": "30/min"}.')),
                ('created', models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.CreateModel(
            name='TeamMember',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('email', models.EmailField(max_length=254)),
                ('created', models.DateTimeField(auto_now_add=True)),
                ('service', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='team_members', to='clients.service')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('service', 'email'), name='team_member_service_email_unique')],
            },
        ),
        migrations.AddField(
            model_name='apiclient',
            name='service',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='api_keys', to='clients.service'),
        ),
        migrations.AddField(
            model_name='apiclient',
            name='key_type',
            field=models.CharField(choices=[('live', 'live'), ('team', 'team (team list only)'), ('test', 'test (sends nothing)')], default='live', max_length=4),
        ),
        migrations.AddField(
            model_name='apiclient',
            name='created_by',
            field=models.CharField(blank=True, default='', help_text='Who made the key: a user, a key or a command.', max_length=150),
        ),
        migrations.RunPython(services_from_clients, clients_from_services),
        migrations.AlterField(
            model_name='apiclient',
            name='service',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_keys', to='clients.service'),
        ),
        migrations.AlterField(
            model_name='apiclient',
            name='scopes',
            field=models.JSONField(blank=True, default=clients.scopes.default_scopes, help_text="A subset of the service's scopes."),
        ),
        migrations.AlterField(
            model_name='apiclient',
            name='rate_limit',
            field=models.CharField(blank=True, default='', help_text="A lower limit for this key alone (never above the service's); empty: none.", max_length=20, validators=[clients.rates.validate_rate]),
        ),
        migrations.AlterField(
            model_name='apiclient',
            name='endpoint_rate_limits',
            field=models.JSONField(blank=True, default=dict, help_text='Lower limits per endpoint class for this key alone.'),
        ),
        migrations.AlterField(
            model_name='idempotencyrecord',
            name='client',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='clients.service'),
        ),
    ]
