"""The API client model is now what it always was, a key: ApiClient -> ApiKey (decision 102)."""

from django.db import migrations


class Migration(migrations.Migration):

    # Each app's `owner_is_the_service` says `run_before` this one: the owner fields point at
    # the service before the model they pointed at is renamed.
    dependencies = [
        ('clients', '0004_services'),
    ]

    operations = [
        migrations.RenameModel('ApiClient', 'ApiKey'),
        migrations.AlterModelOptions(
            name='apikey',
            options={'ordering': ('-created',), 'verbose_name': 'API key', 'verbose_name_plural': 'API keys'},
        ),
    ]
