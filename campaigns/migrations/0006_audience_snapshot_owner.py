"""A campaign's audience snapshot names whose contacts it reaches (`client_id`, decision 50):
campaigns from before tenancy get their client, or the owner the audience rows migrated to."""

from django.db import migrations

from clients.legacy_owner import legacy_owner_id


def backfill(apps, schema_editor):
    campaign = apps.get_model("campaigns", "Campaign")
    missing = campaign.objects.exclude(audience__has_key="client_id").exclude(audience={})
    if not missing.exists():
        return
    fallback = legacy_owner_id(apps)
    for row in missing.only("id", "client_id", "audience").iterator():
        audience = {**row.audience, "client_id": row.client_id or fallback}
        campaign.objects.filter(pk=row.pk).update(audience=audience)


class Migration(migrations.Migration):
    # Its owner backfill writes API clients as they were before services (decision 102).
    run_before = [('clients', '0004_services')]

    dependencies = [
        ('campaigns', '0005_audience_models_moved'),
        ('audience', '0003_audience_owner'),
    ]

    operations = [
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
