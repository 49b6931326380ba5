"""drf-spectacular: how an API key or an OAuth2 bearer token is sent, for the OpenAPI schema and
Swagger UI's Authorize (every operation lists both: either is enough)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension

from clients.scopes import Scope


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "clients.authentication.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema: Any) -> dict:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Api-Key <key>`; create one with `python manage.py create_api_key NAME`.",
        }


class BearerTokenAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "clients.oauth_authentication.BearerTokenAuthentication"
    name = "OAuth2"

    def get_security_definition(self, auto_schema: Any) -> dict:
        return {
            "type": "oauth2",
            "description": "`Bearer <token>`: an access token from `POST /oauth/token` (RFC 6749 "
                           "client credentials), for a client made by `POST /api/v1/oauth-clients` "
                           "or `python manage.py create_oauth_client`.",
            "flows": {"clientCredentials": {
                "tokenUrl": "/oauth/token",
                "scopes": {str(value): str(label) for value, label in Scope.choices},
            }},
        }
