"""URLs of the campaigns app (included from notifier/urls.py)."""

from django.urls import path

import core.url_converters  # noqa: F401 - registers <id:...>
from campaigns.api import campaigns as campaign_api
from campaigns.api.preview import TemplatePreviewApi

_action = campaign_api.CampaignActionApi.as_view

urlpatterns = [
    path("api/v1/notifications/email", campaign_api.CampaignSendApi.as_view(), name="campaign-send"),
    path("api/v1/campaigns", campaign_api.CampaignListApi.as_view(), name="campaigns"),
    path("api/v1/campaigns/<id:campaign_id>", campaign_api.CampaignDetailApi.as_view(),
         name="campaign-detail"),
    path("api/v1/campaigns/<id:campaign_id>/pause", _action(action_name="pause"), name="campaign-pause"),
    path("api/v1/campaigns/<id:campaign_id>/resume", _action(action_name="resume"), name="campaign-resume"),
    path("api/v1/campaigns/<id:campaign_id>/cancel", _action(action_name="cancel"), name="campaign-cancel"),
    path("api/v1/campaigns/<id:campaign_id>/test", campaign_api.CampaignTestApi.as_view(),
         name="campaign-test"),
    path("api/v1/templates/<id:template_id>/preview", TemplatePreviewApi.as_view(), name="template-preview"),
]
