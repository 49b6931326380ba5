"""The message log's indexes (GET /api/v1/messages, decision 114).

Built CONCURRENTLY (the migration is not atomic): the message table is the biggest and the
hottest, and a plain CREATE INDEX would block every send for as long as the build takes
(minutes on 10M rows). A build interrupted leaves an INVALID index: drop it
(`DROP INDEX CONCURRENTLY <name>`) and run the migration again. `msg_client_idx` is dropped only
after `msg_client_created_idx`, which leads with the same column, is built.
"""

import django.contrib.postgres.indexes
import django.db.models.functions.text
from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('delivery', '0016_emailmessage_metadata'),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='emailmessage',
            index=models.Index(condition=models.Q(('client__isnull', False)), fields=['client', '-created_at', '-id'], name='msg_client_created_idx'),
        ),
        RemoveIndexConcurrently(
            model_name='emailmessage',
            name='msg_client_idx',
        ),
        AddIndexConcurrently(
            model_name='emailmessage',
            index=models.Index(models.F('client'), django.db.models.functions.text.Lower('recipient'), models.OrderBy(models.F('created_at'), descending=True), models.OrderBy(models.F('id'), descending=True), condition=models.Q(('contact__isnull', True)), name='msg_client_recipient_idx'),
        ),
        AddIndexConcurrently(
            model_name='emailmessage',
            index=django.contrib.postgres.indexes.GinIndex(condition=models.Q(('metadata__isnull', False)), fields=['metadata'], name='msg_metadata_idx', opclasses=['jsonb_path_ops']),
        ),
    ]
