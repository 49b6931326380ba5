"""Routes of the feedback app: ESP webhooks (analytics, /metrics and the dashboard join later)."""

from django.urls import include, path

urlpatterns = [
    path("", include("feedback.webhooks.urls")),
]
