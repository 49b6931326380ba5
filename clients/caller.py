"""Who is calling: the service, the credential it presented, and what that credential may do.

Authentication (clients/authentication.py) makes a `Caller` the request's `user`, so every view
reads its tenant as `request.user.service` (and its id as `request.user.pk`) and every
permission reads the credential's effective scopes, never the service's wider ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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

    is_authenticated = True
    is_anonymous = False

    @property
    def pk(self) -> str:
        """The tenant's id: what every owner column (`client_id`) holds."""
        return self.service.pk

    def __bool__(self) -> bool:
        return True

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
