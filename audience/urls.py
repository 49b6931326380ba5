"""URLs of the audience app (included from notifier/urls.py)."""

from django.urls import path

from audience import api

urlpatterns = [
    path("api/v1/contacts/bulk", api.ContactBulkApi.as_view(), name="contacts-bulk"),
    path("api/v1/lists", api.ListApi.as_view(), name="lists"),
    path("api/v1/segments", api.SegmentApi.as_view(), name="segments"),
    path("api/v1/suppressions", api.SuppressionApi.as_view(), name="suppressions"),
    path("api/v1/suppressions/<str:email>", api.SuppressionDetailApi.as_view(), name="suppression-detail"),
]
