"""`manage.py check`: warn about API views that any valid key can call (no scope set).

Views opt in with `required_scope = "..."` or `permission_classes = [RequiresScope(...)]`;
one that does neither and still authenticates by API key is open to every client, which is
rarely intended. A warning, not an error: public endpoints (webhooks, unsubscribe links) set
their own permission classes and are not reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.core.checks import Warning, register
from django.urls import URLPattern, URLResolver, get_resolver

from clients.scopes import HasViewScope, ScopePermission


def _patterns(resolver: URLResolver, prefix: str = "") -> Iterator[tuple[str, Any]]:
    for pattern in resolver.url_patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _patterns(pattern, route)
        elif isinstance(pattern, URLPattern):
            yield route, getattr(pattern.callback, "cls", None)


def _unscoped(view: Any) -> bool:
    permissions = list(getattr(view, "permission_classes", []))
    has_default = any(p is HasViewScope for p in permissions)
    explicit = any(isinstance(p, type) and issubclass(p, ScopePermission) for p in permissions)
    return has_default and not explicit and not getattr(view, "required_scope", None)


@register()
def api_views_declare_a_scope(app_configs: Any, **kwargs: Any) -> list[Warning]:
    return [
        Warning(f"API view {view.__module__}.{view.__name__} ({route}) sets no scope: any valid "
                "API key may call it.", hint='Set required_scope = "..." on the view.',
                obj=view, id="clients.W001")
        for route, view in _patterns(get_resolver())
        if route.startswith("api/") and view is not None and _unscoped(view)
    ]
