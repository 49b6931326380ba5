"""Analytics API: campaign stats and the platform overview (API-key authenticated, read only)."""

from __future__ import annotations

from datetime import timedelta

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analytics.horizon import utc_today
from analytics.models import COUNTERS
from analytics.selectors.campaign_stats import SERIES_INTERVALS, campaign_stats
from analytics.selectors.days import BY, MAX_DAYS, service_days
from analytics.selectors.overview import stats_overview
from analytics.services.ended_campaigns import ended_campaign_row_counts
from audience.topic_fields import TopicSummarySerializer
from campaigns.models import Campaign
from clients.key_types import caller_key_type
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
        interval = serializers.ChoiceField(choices=SERIES_INTERVALS)
        points = serializers.ListField(
            child=serializers.DictField(),
            help_text='[{"t": ISO time, "sent": n, "delivered": n, ...}]. minute and hour: every event '
                      'the ESPs reported, in the UTC minute or hour of its time (whole minutes: `since` '
                      'counts from the start of its minute); day: each message once per kind, on the UTC '
                      'day of its first such event, with every counter and the day\'s `source`.')

    campaign = CampaignSerializer()
    counts = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="messages, audience, done, sent, pending, failed, suppressed and the event counts "
                  "(delivered, opened, clicked, bounced, soft_bounced, complained, unsubscribed).")
    rates = serializers.DictField(child=serializers.FloatField(),
                                  help_text="delivery, open, click, bounce, complaint, unsubscribe (0-1).")
    providers = serializers.DictField(child=serializers.DictField(child=serializers.IntegerField()),
                                      help_text="Per provider: sent and each event's count.")
    counts_source = serializers.ChoiceField(
        choices=["rows", "facts"],
        help_text="facts: the campaign began before its service's metadata retention, so `sent`, "
                  "`failed` and `suppressed` are summed from the daily facts (its rows may be gone).")
    rows_counted_at = serializers.DateTimeField(
        help_text="When the campaign's messages were counted (counts, providers' sent, the series' "
                  "sent). Now, but for an ended campaign that no longer changes: its counts are kept "
                  "and recounted at most a quarter of the time since it ended later, and within the hour.")
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


class DaysSerializer(serializers.Serializer):
    """The caller's service per UTC day (`from`/`to` given): analytics.selectors.days."""

    to = serializers.DateField()
    by = serializers.ChoiceField(choices=sorted(BY), allow_null=True)
    points = serializers.ListField(
        child=serializers.DictField(),
        help_text='[{"date": "2026-01-31", "sent": n, "delivered": n, ..., "source": "facts"}]: one per '
                  'day (with `by`: one per day and value, e.g. "template": 7, only where something '
                  f'was counted). Counters: {", ".join(COUNTERS)}.')
    totals = serializers.DictField(child=serializers.IntegerField())
    sources = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Days answered from the daily facts, from the message rows (today, or a day not "
                  "written yet), and with no figures (older than the retention and never written).")

    def get_fields(self) -> dict[str, serializers.Field]:
        return {"from": serializers.DateField(), **super().get_fields()}


class OverviewSerializer(serializers.Serializer):
    generated_at = serializers.DateTimeField()
    throughput = serializers.DictField(help_text="per_priority (sent in the last hour), per_minute.")
    queues = QueueSerializer(many=True)
    workers = serializers.DictField(child=serializers.ListField(child=serializers.CharField()),
                                    help_text="Worker names per queue.")
    providers = ProviderHealthSerializer(many=True)
    webhooks = serializers.DictField(help_text="Deliveries pending and failed, events in the last hour.")
    alerts = serializers.DictField(help_text="overall, per_priority, per_provider: ok | warning | critical.")
    days = DaysSerializer(required=False, help_text="Only when `from`, `to` or `by` is given.")


class DaysQuerySerializer(serializers.Serializer):
    to = serializers.DateField(required=False, help_text="The last UTC day (default: today, UTC).")
    by = serializers.ChoiceField(choices=sorted(BY), required=False,
                                 help_text="Split each day by template, campaign, stream or topic.")

    def get_fields(self) -> dict[str, serializers.Field]:
        since = serializers.DateField(
            required=False, help_text=f"The first UTC day (default: 29 days before `to`); at most "
                                      f"{MAX_DAYS} days in all.")
        return {"from": since, **super().get_fields()}

    def validate(self, attrs: dict) -> dict:
        if not attrs.get("from") and not attrs.get("to") and not attrs.get("by"):
            return attrs
        today = utc_today()
        last = attrs.get("to") or today
        first = attrs.get("from") or last - timedelta(days=29)
        if first > today:
            raise serializers.ValidationError({"from": ["It is after today (UTC)."]})
        if last > today:
            raise serializers.ValidationError({"to": ["It is after today (UTC)."]})
        if first > last:
            raise serializers.ValidationError({"from": ["It is after `to`."]})
        if (last - first).days + 1 > MAX_DAYS:
            raise serializers.ValidationError({"to": [f"At most {MAX_DAYS} days from `from`."]})
        return {**attrs, "from": first, "to": last}


class CampaignStatsApi(APIView):
    required_scope = "analytics"

    class InputSerializer(serializers.Serializer):
        interval = serializers.ChoiceField(choices=SERIES_INTERVALS, default="minute")
        since = serializers.DateTimeField(
            required=False,
            help_text="The series from this time's UTC minute (minute, hour) or day (day) on.")

    @extend_schema(parameters=[InputSerializer], responses={200: CampaignStatsSerializer})
    def get(self, request: Request, campaign_id: int) -> Response:
        """Delivery and engagement counts, rates, per provider and over time."""
        params = self.InputSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        # With its service: the stats read its retention (analytics.horizon), one query fewer.
        campaign = owned_or_404(Campaign.objects.select_related("client"), request.user,
                                message="No such campaign.", pk=campaign_id)
        rows = ended_campaign_row_counts(campaign=campaign)
        return Response(campaign_stats(campaign=campaign, rows=rows, **params.validated_data))


class StatsOverviewApi(APIView):
    required_scope = "analytics"

    @extend_schema(parameters=[DaysQuerySerializer], responses={200: OverviewSerializer})
    def get(self, request: Request) -> Response:
        """Throughput, queues, workers, provider health and alert states; with `from`/`to`, the
        caller's service per UTC day (older days than the message retention from the daily facts)."""
        params = DaysQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        overview = stats_overview()
        days = params.validated_data
        if "from" in days:
            overview["days"] = service_days(service=request.user.service, key_type=caller_key_type(request),
                                            day_from=days["from"], day_to=days["to"], by=days.get("by"))
        return Response(overview)
