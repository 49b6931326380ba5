"""Tenancy: every client-facing row belongs to one API client (decision 50).

Every API view reads client data through `owned(...)`: a client sees only its own rows, a
client with the `admin` scope sees every row. A row of another client is then simply absent
(`owned_or_404` answers 404, never 403), so its id leaks nothing. Suppressions are
platform-wide in effect (one sender reputation: a suppressed address is mailed by no client),
but each records the client that caused it, and only that client lists or removes it.
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.db.models import Model, Q, QuerySet
from rest_framework.exceptions import NotFound

from clients.models import ApiClient
from clients.scopes import Scope

M = TypeVar("M", bound=Model)


def client_is_admin(client: Any) -> bool:
    return Scope.ADMIN in (getattr(client, "scopes", None) or [])


def owned(queryset: QuerySet[M], client: Any, *, field: str = "client") -> QuerySet[M]:
    """The rows of `queryset` the client may see: its own (`field` names the owner), all for admin."""
    if client_is_admin(client):
        return queryset
    return queryset.filter(**{field: getattr(client, "pk", None)})


def owned_or_404(queryset: QuerySet[M], client: Any, *, message: str = "Not found.",
                 field: str = "client", **lookup: Any) -> M:
    """One row the client may see, or 404 (a foreign row is indistinguishable from a missing one)."""
    row = owned(queryset, client, field=field).filter(**lookup).first()
    if row is None:
        raise NotFound(message)
    return row


def client_by_reference(reference: str) -> ApiClient:
    """The client a management command's `--client` names: its key prefix or its (unique) name.

    Raises ValueError when none or several clients match, so a command never guesses an owner.
    """
    matches = list(ApiClient.objects.filter(Q(prefix=reference) | Q(name=reference))[:2])
    if len(matches) != 1:
        problem = "no API client" if not matches else "several API clients"
        raise ValueError(f"{problem} with the key prefix or name {reference!r} "
                         "(see `manage.py create_api_key` and the admin's API clients)")
    return matches[0]
