"""The attempts' BRIN index on created_at, for the dashboard's provider health (the last 15
minutes). Built on each partition CONCURRENTLY (core/partitions/operations.py), so sends go on
during the build; the migration is not atomic: a build interrupted halfway resumes on the next
run. Measured on a month of history (30M attempts): see docs/benchmarks.md, issue 30.
"""

import django.contrib.postgres.indexes
from django.db import migrations

from core.partitions.operations import AddIndexToPartitions


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('delivery', '0024_partitions_upkeep_schedule'),
    ]

    operations = [
        AddIndexToPartitions(
            model_name='deliveryattempt',
            index=django.contrib.postgres.indexes.BrinIndex(autosummarize=True, fields=['created_at'], name='attempt_created_brin'),
        ),
    ]
