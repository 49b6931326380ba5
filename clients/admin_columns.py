"""Admin columns the service, key and OAuth client pages share."""

from __future__ import annotations

from typing import Any

from django.contrib import admin


class ScopeListMixin:
    """A list column of the scopes a service, key or OAuth client holds."""

    @admin.display(description="scopes")
    def scope_list(self, holder: Any) -> str:
        return ", ".join(holder.scopes or [])
