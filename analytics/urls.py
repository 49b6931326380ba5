"""Routes of the analytics app: the statistics API, /metrics and the operator dashboard."""

from django.urls import include, path

import core.url_converters  # noqa: F401 - registers <id:...>
from analytics.api import CampaignStatsApi, StatsOverviewApi
from analytics.metrics import metrics_view

urlpatterns = [
    path("", include("analytics.dashboard.urls")),
    path("api/v1/campaigns/<id:campaign_id>/stats", CampaignStatsApi.as_view(), name="campaign-stats"),
    path("api/v1/stats/overview", StatsOverviewApi.as_view(), name="stats-overview"),
    path("metrics", metrics_view, name="metrics"),
]
