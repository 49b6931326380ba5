"""URLs of the transactional app (included from notifier/urls.py)."""

from django.urls import path

import core.url_converters  # noqa: F401 - registers <id:...>
from transactional.api import AmbiguousMessagesApi, MessageCreateApi, MessageDetailApi
from transactional.batch_api import MessageBatchCreateApi
from transactional.log_api import MessageEventsApi

urlpatterns = [
    path("api/v1/messages", MessageCreateApi.as_view(), name="message-create"),
    path("api/v1/messages/batch", MessageBatchCreateApi.as_view(), name="message-batch"),
    path("api/v1/messages/ambiguous", AmbiguousMessagesApi.as_view(), name="message-ambiguous"),
    path("api/v1/messages/<id:message_id>", MessageDetailApi.as_view(), name="message-detail"),
    path("api/v1/messages/<id:message_id>/events", MessageEventsApi.as_view(), name="message-events"),
]
