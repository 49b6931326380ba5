"""What a key may do: scopes, and the DRF permission that checks them.

Any view opts in with one line, either

    permission_classes = [RequiresScope("campaigns")]

or, keeping the project's default permissions (which include `HasViewScope`),

    required_scope = "campaigns"            # or a tuple: any of them

A key without the scope gets 403 in the error shape. The `analytics` scope is read-only: it
never grants an unsafe method. `admin` grants every scope.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request


class Scope(models.TextChoices):
    SEND = "send", "send transactional messages"
    CAMPAIGNS = "campaigns", "manage contacts, lists and campaigns"
    SCHEDULES = "schedules", "manage schedules"
    ANALYTICS = "analytics", "read analytics (read-only)"
    KEYS = "keys", "manage the service's own keys, OAuth clients and team list"
    ADMIN = "admin", "everything, of every service"


READ_ONLY_SCOPES = frozenset({Scope.ANALYTICS})
DEFAULT_SCOPES = [Scope.SEND, Scope.CAMPAIGNS, Scope.SCHEDULES, Scope.ANALYTICS, Scope.KEYS]


def default_scopes() -> list[str]:
    """Every non-admin scope (the model default and `create_api_key` without --scopes)."""
    return [str(scope) for scope in DEFAULT_SCOPES]


def parse_scopes(text: str) -> list[str]:
    """'send, campaigns' -> ['send', 'campaigns']; raises ValueError naming unknown scopes."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = sorted(set(names) - set(Scope.values))
    if unknown or not names:
        raise ValueError(f"Unknown scopes: {', '.join(unknown) or '(none given)'}; "
                         f"choose from {', '.join(Scope.values)}.")
    return sorted(set(names), key=Scope.values.index)


def client_allows(client: Any, scopes: str | tuple[str, ...], method: str) -> bool:
    """True if the client holds any of `scopes` (admin holds all) for this HTTP method."""
    granted = set(getattr(client, "scopes", None) or [])
    if Scope.ADMIN in granted:
        return True
    wanted = (scopes,) if isinstance(scopes, str) else scopes
    return any(
        scope in granted and (scope not in READ_ONLY_SCOPES or method in SAFE_METHODS)
        for scope in wanted
    )


def _missing(scopes: str | tuple[str, ...]) -> str:
    names = (scopes,) if isinstance(scopes, str) else scopes
    return f"This credential lacks the {' or '.join(repr(name) for name in names)} scope."


class ScopePermission(BasePermission):
    """Base class; `RequiresScope(name)` builds the subclass for one scope."""

    scopes: tuple[str, ...] = ()
    code = "missing_scope"

    def has_permission(self, request: Request, view: Any) -> bool:
        self.message = _missing(self.scopes)
        return bool(request.user) and client_allows(request.user, self.scopes, request.method)


def RequiresScope(*scopes: str) -> type[ScopePermission]:  # noqa: N802 - reads as a class at use
    """A permission class demanding any of `scopes` (DRF instantiates permission classes)."""
    unknown = set(scopes) - set(Scope.values)
    if unknown or not scopes:
        raise ValueError(f"unknown scopes {sorted(unknown)}")
    return type(f"RequiresScope_{'_'.join(scopes)}", (ScopePermission,), {"scopes": scopes})


class HasViewScope(BasePermission):
    """In the default permissions: enforces `view.required_scope` where a view sets it.

    Views that set nothing are open to every authenticated client (the state before scopes).
    """

    code = "missing_scope"

    def has_permission(self, request: Request, view: Any) -> bool:
        scopes = getattr(view, "required_scope", None)
        if not scopes:
            return True
        self.message = _missing(scopes)
        return bool(request.user) and client_allows(request.user, scopes, request.method)
