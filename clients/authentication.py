"""DRF authentication by `Authorization: Api-Key <key>` (any other scheme is a 401 saying so).

The key is looked up by its public prefix and checked against the stored SHA-512 hash with a
constant-time compare (djangorestframework-api-key); revoked and expired keys are refused (401).
A verified key is remembered for a few seconds (clients/key_cache.py); expiry is checked on
every request.
"""

from __future__ import annotations

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from clients.key_cache import client_for_key
from clients.models import ApiClient
from clients.services import api_client_touch

KEYWORD = "Api-Key"


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """The client becomes `request.user`, so views read the caller from one place."""

    def authenticate(self, request: Request) -> tuple[ApiClient, ApiClient] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "").strip()
        if not header:
            return None  # DRF answers 401 "not provided" (core/api/errors.py names the scheme)
        scheme, _, key = header.partition(" ")
        # Auth schemes are case-insensitive (RFC 9110 11.1). Another one (`Bearer <key>`, a bare
        # key) is the caller's likely mistake: say which scheme we expect instead of answering
        # "not provided" to a request that plainly carries credentials. The header itself is
        # never echoed: a bare key would be its "scheme".
        if scheme.lower() != KEYWORD.lower():
            raise exceptions.AuthenticationFailed(
                f"Unsupported authorization scheme: use 'Authorization: {KEYWORD} <key>'."
            )
        key = key.strip()
        try:
            client = client_for_key(key)
        except ApiClient.DoesNotExist:
            raise exceptions.AuthenticationFailed("Invalid API key.") from None
        # get_from_key already checked the hash; it does not check expiry (is_valid on the
        # model is only the hash), so an expired key must be refused here.
        if client.has_expired:
            raise exceptions.AuthenticationFailed("API key has expired.")
        api_client_touch(client=client)
        return client, client

    def authenticate_header(self, request: Request) -> str:
        return KEYWORD
