from django.apps import AppConfig


class AnalyticsConfig(AppConfig):
    """Reads for people: campaign statistics, the overview, /metrics and the live dashboard."""

    name = "analytics"
