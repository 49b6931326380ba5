"""A partial index for the orphan sweeps: transactional QUEUED rows no worker claimed (decision 119).

The sweeps asked for `status = 'QUEUED' AND campaign_id IS NULL AND claimed_at IS NULL` through
`msg_status_claimed_idx`, which holds a campaign's QUEUED rows too: during a 1M fan-out each
sweep walked ~700,000 of them to find none (771 ms, every scheduler tick). This index holds only
the rows the sweeps want, in their rank order. Built CONCURRENTLY like 0017 (an interrupted
build leaves an INVALID index: drop it and run the migration again).
"""

import django.db.models.functions.comparison
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models

import core.db_lookups  # noqa: F401  (the condition's `__unindexed`)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('delivery', '0018_campaign_log_index'),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='emailmessage',
            index=models.Index(models.F('priority'), models.OrderBy(django.db.models.functions.comparison.Coalesce('requeued_at', 'created_at'), descending=True), models.OrderBy(models.F('id'), descending=True), condition=models.Q(('campaign__isnull', True), ('claimed_at__isnull', True), ('status__unindexed', 'QUEUED')), name='msg_queued_txn_idx'),
        ),
    ]
