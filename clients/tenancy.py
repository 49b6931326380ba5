"""Tenancy: every client-facing row belongs to one service (decisions 50, 102).

Every API view reads tenant data through `owned(...)` with the request's Caller: a service's
keys see only its own rows, a key holding the `admin` scope sees every row. A row of another
service is then simply absent (`owned_or_404` answers 404, never 403), so its id leaks nothing.
Suppressions are platform-wide in effect (one sender reputation: a suppressed address is mailed
by no service), but each records the service that caused it, and only that service lists or
removes it. The owner column keeps its historical name, `client`.
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.db.models import Model, Q, QuerySet
from rest_framework.exceptions import NotFound

from clients.models import Service
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


def service_by_reference(reference: str) -> Service:
    """The service a management command's `--service` (or `--client`) names: its id, its
    (unique) name, or the public prefix of one of its keys.

    Raises ValueError when none or several services match, so a command never guesses an owner.
    """
    matches = list(Service.objects.filter(
        Q(pk=reference) | Q(name=reference) | Q(api_keys__prefix=reference)).distinct()[:2])
    if len(matches) != 1:
        problem = "no service" if not matches else "several services"
        raise ValueError(f"{problem} with the id, name or key prefix {reference!r} "
                         "(see `manage.py create_api_key` and the admin's services)")
    return matches[0]
