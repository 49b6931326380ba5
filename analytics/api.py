"""Analytics API: campaign stats and the platform overview (API-key authenticated, read only)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analytics.selectors.campaign_stats import INTERVALS, campaign_stats
from analytics.selectors.overview import stats_overview
from audience.topic_fields import TopicSummarySerializer
from campaigns.models import Campaign
from clients.tenancy import owned_or_404


class TopicUnsubscribesSerializer(serializers.Serializer):
    topic = TopicSummarySerializer(allow_null=True, help_text="null: the whole broadcast stream.")
    unsubscribed = serializers.IntegerField(help_text="Recipients who left it through this campaign's mail.")


class CampaignStatsSerializer(serializers.Serializer):
    class CampaignSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        name = serializers.CharField()
        status = serializers.CharField()

    class SeriesSerializer(serializers.Serializer):
        interval = serializers.ChoiceField(choices=sorted(INTERVALS))
        points = serializers.ListField(
            child=serializers.DictField(), help_text='[{"t": ISO time, "sent": n, "delivered": n, ...}]')

    campaign = CampaignSerializer()
    counts = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="messages, audience, done, sent, pending, failed, suppressed and the event counts "
                  "(delivered, opened, clicked, bounced, soft_bounced, complained, unsubscribed).")
    rates = serializers.DictField(child=serializers.FloatField(),
                                  help_text="delivery, open, click, bounce, complaint, unsubscribe (0-1).")
    providers = serializers.DictField(child=serializers.DictField(child=serializers.IntegerField()),
                                      help_text="Per provider: sent and each event's count.")
    unsubscribes_by_topic = TopicUnsubscribesSerializer(
        many=True, help_text="Recipients this campaign's mail made leave a topic (its one-click link, "
                             "an ESP's unsubscribe), one row per topic; each recipient counted once.")
    series = SeriesSerializer()


class QueueSerializer(serializers.Serializer):
    priority = serializers.CharField()
    queue = serializers.CharField()
    pending = serializers.IntegerField()
    processing = serializers.IntegerField()
    broker_tasks = serializers.IntegerField(allow_null=True)
    oldest_age_seconds = serializers.FloatField(allow_null=True)
    sla_seconds = serializers.FloatField()
    alert = serializers.CharField()
    workers = serializers.ListField(child=serializers.CharField())


class ProviderHealthSerializer(serializers.Serializer):
    provider = serializers.CharField()
    attempts = serializers.IntegerField()
    failed = serializers.IntegerField()
    error_rate = serializers.FloatField()
    latency_p95_ms = serializers.FloatField(allow_null=True)
    breaker = serializers.CharField()
    fault = serializers.CharField(allow_blank=True)
    alert = serializers.CharField()


class OverviewSerializer(serializers.Serializer):
    generated_at = serializers.DateTimeField()
    throughput = serializers.DictField(help_text="per_priority (sent in the last hour), per_minute.")
    queues = QueueSerializer(many=True)
    workers = serializers.DictField(child=serializers.ListField(child=serializers.CharField()),
                                    help_text="Worker names per queue.")
    providers = ProviderHealthSerializer(many=True)
    webhooks = serializers.DictField(help_text="Deliveries pending and failed, events in the last hour.")
    alerts = serializers.DictField(help_text="overall, per_priority, per_provider: ok | warning | critical.")


class CampaignStatsApi(APIView):
    required_scope = "analytics"

    class InputSerializer(serializers.Serializer):
        interval = serializers.ChoiceField(choices=sorted(INTERVALS), default="minute")
        since = serializers.DateTimeField(required=False)

    @extend_schema(parameters=[InputSerializer], responses={200: CampaignStatsSerializer})
    def get(self, request: Request, campaign_id: int) -> Response:
        """Delivery and engagement counts, rates, per provider and over time."""
        params = self.InputSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        campaign = owned_or_404(Campaign.objects.all(), request.user, message="No such campaign.",
                                pk=campaign_id)
        return Response(campaign_stats(campaign=campaign, **params.validated_data))


class StatsOverviewApi(APIView):
    required_scope = "analytics"

    @extend_schema(responses={200: OverviewSerializer})
    def get(self, request: Request) -> Response:
        """Throughput, queues, workers, provider health and alert states."""
        return Response(stats_overview())
