"""Routes of the feedback app: the ESP webhooks."""

from django.urls import include, path

urlpatterns = [
    path("", include("feedback.webhooks.urls")),
]
