"""The rows sent on one day, for the daily facts (decision 118).

Built CONCURRENTLY (the migration is not atomic), as 0017: the message table is the biggest and
the hottest. A build interrupted leaves an INVALID index: drop it
(`DROP INDEX CONCURRENTLY msg_sent_at_idx`) and run the migration again.
"""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('delivery', '0019_queued_txn_index'),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='emailmessage',
            index=models.Index(condition=models.Q(('sent_at__isnull', False)), fields=['sent_at'], name='msg_sent_at_idx'),
        ),
    ]
