"""No database constraint from an event or a mark to its message (decision 122): the messages
table becomes day-partitioned (delivery 0023), and its days are dropped whole."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("delivery", "0022_personal_data_indexes"),
        ("feedback", "0006_owner_is_the_service"),
    ]

    operations = [
        migrations.AlterField(
            model_name="emailevent", name="message",
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True,
                                    on_delete=django.db.models.deletion.CASCADE, related_name="events",
                                    to="delivery.emailmessage"),
        ),
        migrations.AlterField(
            model_name="messageeventmark", name="message",
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE,
                                    related_name="+", to="delivery.emailmessage"),
        ),
    ]
