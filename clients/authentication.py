"""DRF authentication by `Authorization: Api-Key <key>`. `Bearer <token>` is left to
clients/oauth_authentication.py; any other scheme is a 401 naming both.

The key is looked up by its public prefix and checked against the stored SHA-512 hash with a
constant-time compare (djangorestframework-api-key); revoked and expired keys are refused (401).
A verified key is remembered for a few seconds (clients/key_cache.py); expiry is checked on
every request. The request's user becomes a `Caller` (clients/caller.py): the key's service and
what this key may do.
"""

from __future__ import annotations

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from clients.caller import Caller, effective_scopes
from clients.models import ApiKey
from clients.selectors import UnusableKeyError, api_key_usable
from clients.services import api_key_touch

KEYWORD = "Api-Key"
BEARER_KEYWORD = "Bearer"  # an OAuth2 access token (clients/oauth_authentication.py)


def caller_for_key(api_key: ApiKey) -> Caller:
    return Caller(
        service=api_key.service, credential=api_key,
        scopes=effective_scopes(api_key.scopes, api_key.service.scopes),
        key_type=api_key.key_type, rate_limit=api_key.rate_limit,
        endpoint_rate_limits=api_key.endpoint_rate_limits or None, label=api_key.prefix,
    )


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """The Caller becomes `request.user` and the key `request.auth`."""

    def authenticate(self, request: Request) -> tuple[Caller, ApiKey] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "").strip()
        if not header:
            return None  # DRF answers 401 "not provided" (core/api/errors.py names the scheme)
        scheme, _, key = header.partition(" ")
        # Auth schemes are case-insensitive (RFC 9110 11.1). `Bearer` is the next class's.
        # Another one (`Token <key>`, a bare key) is the caller's likely mistake: say which
        # schemes we expect instead of answering "not provided" to a request that plainly
        # carries credentials. The header itself is never echoed: a bare key would be its
        # "scheme".
        if scheme.lower() == BEARER_KEYWORD.lower():
            return None
        if scheme.lower() != KEYWORD.lower():
            raise exceptions.AuthenticationFailed(
                f"Unsupported authorization scheme: use 'Authorization: {KEYWORD} <key>' or "
                f"'Authorization: {BEARER_KEYWORD} <token>'."
            )
        try:
            api_key = api_key_usable(key)
        except UnusableKeyError as exc:
            raise exceptions.AuthenticationFailed(str(exc)) from None
        api_key_touch(api_key=api_key)
        return caller_for_key(api_key), api_key

    def authenticate_header(self, request: Request) -> str:
        # DRF takes the first class's challenge for every 401: name both schemes (RFC 9110 11.6.1).
        return f"{KEYWORD}, {BEARER_KEYWORD}"
