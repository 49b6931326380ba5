"""The indexes of personal-data removal (decision 120), built CONCURRENTLY as 0017 and 0018
(the migration is not atomic; an interrupted build leaves an INVALID index: drop it with
`DROP INDEX CONCURRENTLY <name>` and run the migration again).

`msg_personal_due_idx`: the settled rows still holding personal data, per service and stream,
oldest first; on an existing table its first build holds every settled row (the backlog the
first removal drains). `msg_client_recipient_hash_idx`: scrubbed rows of no contact by the
address's hash, for the message log's `recipient` filter; empty until the first removal.
"""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('delivery', '0021_message_personal_data'),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='emailmessage',
            index=models.Index(condition=models.Q(('personal_data_removed_at__isnull', True), ('status__in', ('SENT', 'DELIVERED', 'OPENED', 'CLICKED', 'BOUNCED', 'COMPLAINED', 'FAILED', 'SUPPRESSED', 'CANCELLED'))), fields=['client', 'stream', 'created_at', 'id'], name='msg_personal_due_idx'),
        ),
        AddIndexConcurrently(
            model_name='emailmessage',
            index=models.Index(models.F('client'), models.F('recipient_hash'), models.OrderBy(models.F('created_at'), descending=True), models.OrderBy(models.F('id'), descending=True), condition=models.Q(('contact__isnull', True), ('recipient_hash__isnull', False)), name='msg_client_recipient_hash_idx'),
        ),
    ]
