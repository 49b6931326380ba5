"""Analytics API: campaign stats and the platform overview (API-key authenticated, read only)."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analytics.selectors.campaign_stats import INTERVALS, campaign_stats
from analytics.selectors.overview import stats_overview
from campaigns.models import Campaign
from clients.tenancy import owned_or_404


class CampaignStatsApi(APIView):
    required_scope = "analytics"
    class InputSerializer(serializers.Serializer):
        interval = serializers.ChoiceField(choices=sorted(INTERVALS), default="minute")
        since = serializers.DateTimeField(required=False)

    def get(self, request: Request, campaign_id: int) -> Response:
        """Delivery and engagement counts, rates, per provider and over time."""
        params = self.InputSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        campaign = owned_or_404(Campaign.objects.all(), request.user, message="No such campaign.",
                                pk=campaign_id)
        return Response(campaign_stats(campaign=campaign, **params.validated_data))


class StatsOverviewApi(APIView):
    required_scope = "analytics"
    def get(self, request: Request) -> Response:
        """Throughput, queues, workers, provider health and alert states."""
        return Response(stats_overview())
