"""Messages and attempts partitioned by day on their id (decision 122).

A new install's (or a small) table is converted here; a big one is left as it is, working as
before, for `manage.py partition_tables`, which moves it while the system runs. The idempotency
key's unique constraint leaves the model: the old table keeps it until its conversion, and
after it each day's partition has its own (delivery/partitioning.py).
"""

import django.db.models.deletion
from django.db import migrations, models


def partition(apps, schema_editor) -> None:
    from core.partitions.convert import convert_if_small
    from delivery.partitioning import ATTEMPTS, MESSAGES

    for spec in (MESSAGES, ATTEMPTS):
        print(f"\n  {convert_if_small(spec)}", end="")


def unpartition(apps, schema_editor) -> None:
    from core.partitions.revert import revert_if_small
    from delivery.partitioning import ATTEMPTS, MESSAGES

    for spec in (ATTEMPTS, MESSAGES):
        revert_if_small(spec)


class Migration(migrations.Migration):
    # The ESP events' and marks' foreign keys to a message go with the old table (convert.py
    # drops every key that references it; feedback 0007 then finds nothing to drop).
    dependencies = [("delivery", "0022_personal_data_indexes")]

    operations = [
        migrations.AlterField(
            model_name="deadletter", name="message",
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE,
                                    related_name="dead_letters", to="delivery.emailmessage"),
        ),
        migrations.AlterField(
            model_name="deliveryattempt", name="message",
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE,
                                    related_name="delivery_attempts", to="delivery.emailmessage"),
        ),
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.RemoveConstraint(model_name="emailmessage", name="msg_idempotency_key_uniq"),
        ]),
        migrations.RunPython(partition, unpartition, elidable=False),
    ]
