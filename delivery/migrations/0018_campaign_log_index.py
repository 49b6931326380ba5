"""The campaign index widened for the message log by campaign (decision 116).

`(campaign_id, status)` becomes `(campaign_id, status, created_at DESC, id DESC)`: every query the
old one served reads the new one by its first columns, and GET /api/v1/messages?campaign= reads
one campaign's newest rows of each status in index order instead of walking every newer row of
the service. Built CONCURRENTLY like 0017 (an interrupted build leaves an INVALID index: drop it
and run the migration again); the old index is dropped only once the new one is built.
"""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('delivery', '0017_message_log_indexes'),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='emailmessage',
            index=models.Index(models.F('campaign'), models.F('status'), models.OrderBy(models.F('created_at'), descending=True), models.OrderBy(models.F('id'), descending=True), name='msg_campaign_log_idx'),
        ),
        RemoveIndexConcurrently(
            model_name='emailmessage',
            name='msg_campaign_status_idx',
        ),
    ]
