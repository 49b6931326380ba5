"""Contacts, lists and segments belong to an API client; emails and names are unique per client
and the fan-out walks one client's contacts by (client, id) (decision 50)."""

import django.db.models.deletion
from django.db import migrations, models

from clients.legacy_owner import owner_backfill

OWNED = ['contact', 'contactlist', 'segment']


def backfill(apps, schema_editor):
    owner_backfill(apps, "audience", ["Contact", "ContactList", "Segment"])


def _owner(name: str, null: bool) -> models.ForeignKey:
    # A contact's owner is indexed by (client, id) and (client, email) only.
    return models.ForeignKey(null=null, on_delete=django.db.models.deletion.PROTECT, related_name='+',
                             to='clients.apiclient', db_index=name != 'contact')


class Migration(migrations.Migration):
    # Its owner backfill writes API clients as they were before services (decision 102).
    run_before = [('clients', '0004_services')]

    dependencies = [
        ('clients', '0003_idempotency_record'),
        ('audience', '0002_tables_renamed'),
    ]

    operations = [
        *[migrations.AddField(model_name=name, name='client', field=_owner(name, True)) for name in OWNED],
        migrations.RunPython(backfill, migrations.RunPython.noop),
        *[migrations.AlterField(model_name=name, name='client', field=_owner(name, False)) for name in OWNED],
        migrations.AlterField(model_name='contact', name='email', field=models.EmailField(max_length=254)),
        migrations.AlterField(model_name='contactlist', name='name', field=models.CharField(max_length=200)),
        migrations.AlterField(model_name='segment', name='name', field=models.CharField(max_length=200)),
        migrations.AddIndex(
            model_name='contact',
            index=models.Index(fields=['client', 'id'], name='contact_client_id_idx'),
        ),
        migrations.AddConstraint(
            model_name='contact',
            constraint=models.UniqueConstraint(fields=('client', 'email'), name='contact_client_email_unique'),
        ),
        migrations.AddConstraint(
            model_name='contactlist',
            constraint=models.UniqueConstraint(fields=('client', 'name'), name='contactlist_client_name_unique'),
        ),
        migrations.AddConstraint(
            model_name='segment',
            constraint=models.UniqueConstraint(fields=('client', 'name'), name='segment_client_name_unique'),
        ),
    ]
