"""DRF authentication by `Authorization: Bearer <token>`: an OAuth2 access token (decision 104).

Beside clients/authentication.py's `Api-Key`: each class answers its own scheme and passes
(None) on the other, so DRF tries the next. The token is found by its SHA-256 (the only form
stored) through a per-process cache (clients/oauth_cache.py); expiry is checked here on every
request. The request's user becomes the same `Caller` an API key makes: the client's service,
the token's scopes within what the client and the service still grant, key type live, and the
client id as its label.
"""

from __future__ import annotations

import re

from oauth2_provider.models import AccessToken
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from clients.authentication import BEARER_KEYWORD
from clients.authentication import KEYWORD as API_KEY_KEYWORD
from clients.caller import Caller
from clients.key_types import KeyType
from clients.oauth_cache import access_token_for
from clients.oauth_scopes import oauth_client_scopes

# RFC 6750 2.1's b64token: anything else cannot be a token we issued (and is never looked up).
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_MAX_TOKEN_LENGTH = 255


def caller_for_token(access_token: AccessToken) -> Caller:
    client = access_token.application
    allowed = set(oauth_client_scopes(client))
    return Caller(service=client.service, credential=access_token,
                  scopes=frozenset(scope for scope in access_token.scope.split() if scope in allowed),
                  key_type=KeyType.LIVE, label=client.client_id, credential_kind="oauth")


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """The Caller becomes `request.user` and the token row `request.auth`."""

    def authenticate(self, request: Request) -> tuple[Caller, AccessToken] | None:
        scheme, _, token = request.META.get("HTTP_AUTHORIZATION", "").strip().partition(" ")
        if scheme.lower() != BEARER_KEYWORD.lower():
            return None  # not ours: no header, or `Api-Key` (clients/authentication.py)
        token = token.strip()
        if not token or len(token) > _MAX_TOKEN_LENGTH or not _B64TOKEN.fullmatch(token):
            raise exceptions.AuthenticationFailed("Malformed bearer token.")
        try:
            access_token = access_token_for(token)
        except AccessToken.DoesNotExist:
            raise exceptions.AuthenticationFailed("Invalid bearer token.") from None
        if access_token.is_expired():
            raise exceptions.AuthenticationFailed("Bearer token has expired.")
        return caller_for_token(access_token), access_token

    def authenticate_header(self, request: Request) -> str:
        return f"{API_KEY_KEYWORD}, {BEARER_KEYWORD}"
