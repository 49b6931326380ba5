"""DRF authentication by `Authorization: Api-Key <key>`."""

from __future__ import annotations

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from clients.models import ApiClient

KEYWORD = "Api-Key"


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """The client becomes `request.user`, so views read the caller from one place."""

    def authenticate(self, request: Request) -> tuple[ApiClient, ApiClient] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        scheme, _, key = header.partition(" ")
        if scheme != KEYWORD:
            return None
        key = key.strip()
        try:
            client = ApiClient.objects.get_from_key(key)
        except ApiClient.DoesNotExist:
            raise exceptions.AuthenticationFailed("Invalid API key.") from None
        if not client.is_valid(key):
            raise exceptions.AuthenticationFailed("Invalid API key.")
        return client, client

    def authenticate_header(self, request: Request) -> str:
        return KEYWORD
