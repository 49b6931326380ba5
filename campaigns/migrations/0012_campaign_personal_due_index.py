"""`campaign_personal_due_idx` (decision 130): the ended inline campaigns still holding their
addresses, by end. Built CONCURRENTLY as delivery's 0022 (the migration is not atomic; an
interrupted build leaves an INVALID index: `DROP INDEX CONCURRENTLY campaign_personal_due_idx`
and run it again), so a big campaign table takes no lock that stops launches."""

import django.db.models.functions.comparison
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('campaigns', '0011_campaign_personal_data'),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='campaign',
            index=models.Index(django.db.models.functions.comparison.Coalesce('completed_at', 'created_at'), models.F('id'), condition=models.Q(('audience__type', 'inline'), ('personal_data_removed_at__isnull', True), ('status__in', ('COMPLETED', 'CANCELLED', 'FAILED'))), name='campaign_personal_due_idx'),
        ),
    ]
