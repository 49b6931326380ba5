from django.contrib import admin
from django.urls import include, path

from delivery.api import MessageCreateApi, MessageDetailApi
from notifier.health import healthz
from templates.api import TemplateCreateApi

api_v1 = [
    path("api/v1/templates", TemplateCreateApi.as_view(), name="template-create"),
    path("api/v1/messages", MessageCreateApi.as_view(), name="message-create"),
    path("api/v1/messages/<int:message_id>", MessageDetailApi.as_view(), name="message-detail"),
]

urlpatterns = [
    *api_v1,
    path("", include("campaigns.urls")),  # campaigns: contacts, segments, campaigns, unsubscribe
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
]
