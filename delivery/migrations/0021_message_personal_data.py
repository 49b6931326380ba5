"""Personal-data removal after the service's retention (issue 30, decision 120): two nullable
columns, added without writing a row (no default: PostgreSQL changes only the catalogue)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('delivery', '0020_message_sent_at_index'),
    ]

    operations = [
        migrations.AddField(
            model_name='emailmessage',
            name='personal_data_removed_at',
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name='emailmessage',
            name='recipient_hash',
            field=models.BinaryField(blank=True, editable=False, max_length=32, null=True),
        ),
    ]
