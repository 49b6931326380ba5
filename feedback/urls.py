"""Routes of the feedback app: ESP webhooks, analytics API, /metrics and the dashboard."""

from django.urls import include, path

import core.url_converters  # noqa: F401 - registers <id:...>
from feedback.api import CampaignStatsApi, StatsOverviewApi
from feedback.metrics import metrics_view

urlpatterns = [
    path("", include("feedback.webhooks.urls")),
    path("", include("feedback.dashboard.urls")),
    path("api/v1/campaigns/<id:campaign_id>/stats", CampaignStatsApi.as_view(), name="campaign-stats"),
    path("api/v1/stats/overview", StatsOverviewApi.as_view(), name="stats-overview"),
    path("metrics", metrics_view, name="metrics"),
]
