"""URLs of the audience app (included from notifier/urls.py)."""

from django.urls import path

import core.url_converters  # noqa: F401 - registers the <id:...> converter
from audience import api, consent_api

urlpatterns = [
    path("api/v1/contacts/bulk", api.ContactBulkApi.as_view(), name="contacts-bulk"),
    path("api/v1/contacts/<str:contact>/preferences", consent_api.PreferencesApi.as_view(),
         name="contact-preferences"),
    path("api/v1/lists", api.ListApi.as_view(), name="lists"),
    path("api/v1/segments", api.SegmentApi.as_view(), name="segments"),
    path("api/v1/suppressions", api.SuppressionApi.as_view(), name="suppressions"),
    path("api/v1/suppressions/<str:email>", api.SuppressionDetailApi.as_view(), name="suppression-detail"),
    path("api/v1/topics", consent_api.TopicListApi.as_view(), name="topics"),
    path("api/v1/topics/<id:topic_id>", consent_api.TopicDetailApi.as_view(), name="topic-detail"),
]
