"""Every message names its stream and topic (issue 28, decision 106).

Adding the columns writes no row (a constant default stays in the catalogue; the topic is NULL).
Campaign rows are broadcast: they are moved in id batches of 50,000, each its own transaction
(the migration is not atomic), so a big table is never locked as a whole and an interrupted
run is resumed by running it again (the UPDATE skips rows already moved)."""

import django.db.models.deletion
from django.db import migrations, models


BATCH = 50_000


def campaign_rows_to_broadcast(apps, schema_editor) -> None:
    table = apps.get_model("delivery", "EmailMessage")._meta.db_table
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"SELECT min(id), max(id) FROM {table} WHERE campaign_id IS NOT NULL")
        low, high = cursor.fetchone()
        if low is None:
            return
        for start in range(low, high + 1, BATCH):
            cursor.execute(
                f"UPDATE {table} SET stream = 'broadcast' WHERE id >= %s AND id < %s "
                "AND campaign_id IS NOT NULL AND stream <> 'broadcast'",
                [start, start + BATCH],
            )


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('audience', '0007_consent'),
        ('delivery', '0014_emailmessage_key_type'),
    ]

    operations = [
        migrations.AddField(
            model_name='emailmessage',
            name='stream',
            field=models.CharField(choices=[('transactional', 'Transactional'), ('broadcast', 'Broadcast')], db_default='transactional', default='transactional', max_length=13),
        ),
        migrations.AddField(
            model_name='emailmessage',
            name='topic',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='audience.topic'),
        ),
        migrations.RunPython(campaign_rows_to_broadcast, migrations.RunPython.noop, elidable=True),
    ]
