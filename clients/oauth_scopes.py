"""The toolkit's scopes backend (OAUTH2_PROVIDER["SCOPES_BACKEND_CLASS"]): clients.scopes' set.

A token request may ask for any of its client's scopes that the service still grants; without
`scope` it gets all of them. Anything else is the toolkit's `invalid_scope` (RFC 6749 5.2).
"""

from __future__ import annotations

from typing import Any

from oauth2_provider.scopes import BaseScopes

from clients.caller import effective_scopes
from clients.scopes import Scope


def oauth_client_scopes(application: Any) -> list[str]:
    """What a token of this client may hold now: its scopes its service still grants."""
    if application is None:
        return []
    granted = effective_scopes(application.scopes, application.service.scopes)
    return [scope for scope in Scope.values if scope in granted]


class OAuthClientScopes(BaseScopes):
    def get_all_scopes(self) -> dict[str, str]:
        return {str(value): str(label) for value, label in Scope.choices}

    def get_available_scopes(self, application: Any = None, request: Any = None,
                             *args: Any, **kwargs: Any) -> list[str]:
        return oauth_client_scopes(application)

    def get_default_scopes(self, application: Any = None, request: Any = None,
                           *args: Any, **kwargs: Any) -> list[str]:
        return oauth_client_scopes(application)
