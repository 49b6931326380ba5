"""`schedule_personal_due_idx` (decision 132): the cancelled schedules whose definition still
holds inline addresses, by cancellation. Built CONCURRENTLY as campaigns' 0012 (the migration is
not atomic; an interrupted build leaves an INVALID index: `DROP INDEX CONCURRENTLY
schedule_personal_due_idx` and run it again), so a big schedule table (one row per scheduled
campaign) takes no lock that stops launches."""

import django.db.models.functions.comparison
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('scheduling', '0004_schedule_personal_data'),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='schedule',
            index=models.Index(django.db.models.functions.comparison.Coalesce('cancelled_at', 'updated_at'), models.F('id'), condition=models.Q(('definition__recipients__type', 'inline'), ('personal_data_removed_at__isnull', True), ('status', 'cancelled')), name='schedule_personal_due_idx'),
        ),
    ]
