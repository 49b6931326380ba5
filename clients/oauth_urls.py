from django.urls import path

from clients.oauth_api import OAuthClientDetailApi, OAuthClientListCreateApi
from clients.oauth_views import ClientCredentialsTokenView

urlpatterns = [
    path("oauth/token", ClientCredentialsTokenView.as_view(), name="oauth-token"),
    path("api/v1/oauth-clients", OAuthClientListCreateApi.as_view(), name="oauth-client-list"),
    path("api/v1/oauth-clients/<str:client_id>", OAuthClientDetailApi.as_view(),
         name="oauth-client-detail"),
]
