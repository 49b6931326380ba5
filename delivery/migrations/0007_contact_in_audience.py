"""The message's contact now points at audience.Contact (same table, no constraint: state only)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('audience', '0001_models_from_campaigns'),
        ('delivery', '0006_scheduled_messages_index'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.AlterField(
                model_name='emailmessage',
                name='contact',
                field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='audience.contact'),
            ),
        ]),
    ]
