from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

import core.url_converters  # noqa: F401 - registers the <id:...> converter
from core.api.docs import LocalRedocView, redoc_bundle_view
from core.front_page import front_page, tour_page
from core.health import healthz
from delivery.provider_api import ProviderListApi
from scheduling.urls import urlpatterns as scheduling_urls
from templates.api import TemplateDetailApi, TemplateListCreateApi, TemplateRenderApi

api_v1 = [
    path("api/v1/templates", TemplateListCreateApi.as_view(), name="template-list"),
    path("api/v1/templates/<id:template_id>", TemplateDetailApi.as_view(), name="template-detail"),
    path("api/v1/templates/<id:template_id>/render", TemplateRenderApi.as_view(),
         name="template-render"),
    path("", include("transactional.urls")),  # POST /api/v1/messages, GET /api/v1/messages/<id>
    path("api/v1/providers", ProviderListApi.as_view(), name="provider-list"),
    path("", include("clients.urls")),  # the service, its keys and team list
    path("", include("clients.oauth_urls")),  # OAuth2 clients and POST /oauth/token
    path("", include("eventlog.urls")),  # GET /api/v1/events: the service's own event log
]

api_docs = [
    path("api/v1/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/v1/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/v1/redoc/", LocalRedocView.as_view(url_name="schema"), name="api-redoc"),
    path("api/v1/redoc/redoc.standalone.js", redoc_bundle_view, name="api-redoc-bundle"),
]

urlpatterns = [
    path("", front_page, name="front-page"),  # the ready banner's URL and the admin's "View site"
    path("tour/", tour_page, name="tour"),
    *api_docs,
    *api_v1,
    *scheduling_urls,
    path("", include("audience.urls")),  # contacts, lists, segments, suppressions
    path("", include("campaigns.urls")),  # campaigns, template preview
    path("", include("consent.urls")),  # the recipient's pages: one-click unsubscribe, preferences
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("", include("feedback.urls")),  # ESP webhooks
    path("", include("callbacks.urls")),  # status callback endpoints: /api/v1/webhooks
    path("", include("analytics.urls")),  # statistics API, /metrics, /dashboard/
]
