"""URLs of the event log (included from notifier/urls.py)."""

from django.urls import path

from eventlog.api import EventListApi

urlpatterns = [
    path("api/v1/events", EventListApi.as_view(), name="event-list"),
]
