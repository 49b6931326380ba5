"""The audience models left for the audience app (audience 0001): state only, tables kept."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('campaigns', '0004_campaign_audience_size'),
        ('delivery', '0007_contact_in_audience'),
        ('audience', '0001_models_from_campaigns'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.RemoveField(
                model_name='contactlist',
                name='contacts',
            ),
            migrations.DeleteModel(
                name='ContactImport',
            ),
            migrations.DeleteModel(
                name='Segment',
            ),
            migrations.DeleteModel(
                name='Suppression',
            ),
            migrations.DeleteModel(
                name='Contact',
            ),
            migrations.DeleteModel(
                name='ContactList',
            ),
        ]),
    ]
