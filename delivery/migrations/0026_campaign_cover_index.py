"""The campaign index covers provider and sent_at (decision 134): the campaign stats' grouped
read of a settled (vacuumed) campaign becomes an index-only scan, no heap page read.

`msg_campaign_cover_idx` has the key of `msg_campaign_log_idx` (0018) and INCLUDEs the two
columns, so every query the old one served (counters, pause/cancel, the log by campaign) reads
it the same way. Built first, on each partition CONCURRENTLY (core/partitions/operations.py):
sends go on during the build. Then the old index is dropped: CONCURRENTLY on a table not yet
partitioned; on a partitioned one PostgreSQL allows only a plain DROP INDEX of the parent's
(every partition's goes with it, under an ACCESS EXCLUSIVE lock on each until the commit, held
for milliseconds), so it waits at most 200 ms for those locks and tries again, up to 150 times.

Not atomic. To recover from an interruption, run the migration again: a partition's build that
stopped leaves an INVALID index, dropped and rebuilt; built ones are kept; the drop is
IF EXISTS. If the drop gave up (150 lock timeouts: a long read held a partition), the new index
is complete and used; run again at a quieter time.
"""

from django.db import migrations, models

from core.partitions.operations import AddIndexToPartitions, RemoveIndexFromPartitions


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('delivery', '0025_attempt_created_brin'),
    ]

    operations = [
        AddIndexToPartitions(
            model_name='emailmessage',
            index=models.Index(models.F('campaign'), models.F('status'), models.OrderBy(models.F('created_at'), descending=True), models.OrderBy(models.F('id'), descending=True), include=('provider', 'sent_at'), name='msg_campaign_cover_idx'),
        ),
        RemoveIndexFromPartitions(
            model_name='emailmessage',
            name='msg_campaign_log_idx',
        ),
    ]
