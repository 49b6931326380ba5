"""Give the moved tables their own app's names (campaigns_contact -> audience_contact, ...)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('audience', '0001_models_from_campaigns'),
        # After every migration that still names the old tables (the message's contact FK).
        ('delivery', '0007_contact_in_audience'),
        ('campaigns', '0005_audience_models_moved'),
    ]

    operations = [
        migrations.AlterModelTable(
            name='contact',
            table=None,
        ),
        migrations.AlterModelTable(
            name='contactimport',
            table=None,
        ),
        migrations.AlterModelTable(
            name='contactlist',
            table=None,
        ),
        migrations.AlterModelTable(
            name='segment',
            table=None,
        ),
        migrations.AlterModelTable(
            name='suppression',
            table=None,
        ),
    ]
