"""Who is calling: the service, the credential it presented, and what that credential may do.

Authentication (clients/authentication.py) makes a `Caller` the request's `user`, so every view
reads its tenant as `request.user.service` (and its id as `request.user.pk`) and every
permission reads the credential's effective scopes, never the service's wider ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rest_framework import serializers

from clients.key_types import KeyType
from clients.models import Service
from clients.scopes import Scope


@dataclass(frozen=True)
class Caller:
    service: Service
    credential: Any  # an ApiKey, or an OAuth2 access token
    scopes: frozenset[str]
    key_type: str = KeyType.LIVE
    # The credential's own lower rate limits (an API key's overrides), if any.
    rate_limit: str = ""
    endpoint_rate_limits: dict[str, str] | None = None
    # The throttle and log label of the credential (a key's public prefix, an OAuth client id).
    label: str = ""
    # "key" or "oauth": what `maker` says the credential was.
    credential_kind: str = "key"

    is_authenticated = True
    is_anonymous = False

    @property
    def pk(self) -> str:
        """The tenant's id: what every owner column (`client_id`) holds."""
        return self.service.pk

    def __bool__(self) -> bool:
        return True

    @property
    def maker(self) -> str:
        """`created_by` of what this caller makes: `key:<prefix>` or `oauth:<client id>`."""
        return f"{self.credential_kind}:{self.label}"

    def scopes_within(self, wanted: list[str] | None) -> list[str]:
        """The scopes a credential made by this caller gets (default: all of the caller's):
        never one the caller does not hold itself. Raises a 400 naming `scopes`."""
        scopes = wanted or sorted(self.scopes, key=Scope.values.index)
        beyond = sorted(set(scopes) - self.scopes) if Scope.ADMIN not in self.scopes else []
        if beyond:
            raise serializers.ValidationError(
                {"scopes": [f"The credential making it does not hold {', '.join(beyond)}."]})
        return scopes

    @classmethod
    def of_service(cls, service: Service, key_type: str = KeyType.LIVE) -> Caller:
        """The service acting with all its scopes, as a full-scope key of it would."""
        return cls(service=service, credential=None, scopes=frozenset(service.scopes or ()),
                   key_type=key_type, label=service.pk)


def effective_scopes(credential_scopes: list[str] | None, service_scopes: list[str] | None
                     ) -> frozenset[str]:
    """A credential holds only what its service still grants (a scope taken from the service is
    taken from every key at once)."""
    if Scope.ADMIN in (service_scopes or ()):
        return frozenset(credential_scopes or ())
    return frozenset(credential_scopes or ()) & frozenset(service_scopes or ())
