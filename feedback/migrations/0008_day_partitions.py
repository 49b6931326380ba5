"""ESP events partitioned by day on their id, the marks on their message's days (decision
122); as delivery 0023: a big table is left for `manage.py partition_tables`."""

from django.db import migrations


def partition(apps, schema_editor) -> None:
    from core.partitions.convert import convert_if_small
    from feedback.partitioning import EVENTS, MARKS

    for spec in (EVENTS, MARKS):
        print(f"\n  {convert_if_small(spec)}", end="")


def unpartition(apps, schema_editor) -> None:
    from core.partitions.revert import revert_if_small
    from feedback.partitioning import EVENTS, MARKS

    for spec in (MARKS, EVENTS):
        revert_if_small(spec)


class Migration(migrations.Migration):
    dependencies = [
        ("delivery", "0023_day_partitions"),
        ("feedback", "0007_message_no_db_constraint"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.RemoveConstraint(model_name="emailevent", name="event_provider_id_unique"),
        ]),
        migrations.RunPython(partition, unpartition, elidable=False),
    ]
