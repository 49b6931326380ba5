# Consent (issue 28, decision 106): suppression scopes, topics, subscriptions and their history.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('audience', '0006_suppression_sandbox'),
        ('clients', '0006_oauth_client'),
    ]

    operations = [
        migrations.CreateModel(
            name='ConsentChange',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('email', models.EmailField(max_length=254)),
                ('subscribed', models.BooleanField()),
                ('source', models.CharField(choices=[('link', 'one-click link'), ('preference_page', 'preference page'), ('api', 'API'), ('esp_event', 'ESP event'), ('import', 'import'), ('operator', 'operator')], max_length=20)),
                ('campaign_id', models.BigIntegerField(blank=True, null=True)),
                ('occurred_at', models.DateTimeField()),
            ],
        ),
        migrations.CreateModel(
            name='Topic',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=100)),
                ('description', models.TextField(blank=True, default='')),
                ('default_subscribed', models.BooleanField(default=True)),
                ('archived_at', models.DateTimeField(blank=True, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.CreateModel(
            name='TopicSubscription',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('email', models.EmailField(max_length=254)),
                ('subscribed', models.BooleanField()),
                ('updated_at', models.DateTimeField(auto_now=True)),
            ],
        ),
        migrations.RemoveConstraint(
            model_name='suppression',
            name='suppression_email_scope_uniq',
        ),
        migrations.AddField(
            model_name='suppression',
            name='scope',
            field=models.CharField(choices=[('all', 'all streams'), ('broadcast', "the service's broadcast stream")], db_default='all', default='all', max_length=10),
        ),
        # An unsubscribe was platform-wide and stopped every message, an OTP too: it becomes an
        # unsubscribe from the broadcast stream of the service whose mail carried it (issue 28).
        # One with no service (an operator's import) stays all-streams, as it was meant.
        migrations.RunSQL(
            "UPDATE audience_suppression SET scope = 'broadcast' "
            "WHERE reason = 'unsubscribe' AND client_id IS NOT NULL",
            reverse_sql="UPDATE audience_suppression SET scope = 'all'",
        ),
        migrations.AddConstraint(
            model_name='suppression',
            constraint=models.UniqueConstraint(condition=models.Q(('scope', 'all')), fields=('email', 'sandbox'), name='suppression_all_streams_uniq'),
        ),
        migrations.AddConstraint(
            model_name='suppression',
            constraint=models.UniqueConstraint(condition=models.Q(('scope', 'broadcast')), fields=('email', 'sandbox', 'client'), name='suppression_broadcast_uniq'),
        ),
        migrations.AddConstraint(
            model_name='suppression',
            constraint=models.CheckConstraint(condition=models.Q(('scope', 'all'), ('client__isnull', False), _connector='OR'), name='suppression_broadcast_has_service'),
        ),
        migrations.AddField(
            model_name='consentchange',
            name='client',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='clients.service'),
        ),
        migrations.AddField(
            model_name='topic',
            name='client',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='clients.service'),
        ),
        migrations.AddField(
            model_name='consentchange',
            name='topic',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='audience.topic'),
        ),
        migrations.AddField(
            model_name='topicsubscription',
            name='topic',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='audience.topic'),
        ),
        migrations.AddConstraint(
            model_name='topic',
            constraint=models.UniqueConstraint(fields=('client', 'name'), name='topic_client_name_unique'),
        ),
        migrations.AddIndex(
            model_name='consentchange',
            index=models.Index(fields=['client', 'email', 'occurred_at'], name='consent_change_history_idx'),
        ),
        migrations.AddIndex(
            model_name='consentchange',
            index=models.Index(condition=models.Q(('campaign_id__isnull', False)), fields=['campaign_id', 'topic'], name='consent_change_campaign_idx'),
        ),
        migrations.AddConstraint(
            model_name='topicsubscription',
            constraint=models.UniqueConstraint(fields=('topic', 'email'), name='topic_subscription_unique'),
        ),
    ]
