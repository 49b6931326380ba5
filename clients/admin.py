"""API clients in the admin: create (the key is shown once), scopes, rates, revoke."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from rest_framework_api_key.admin import APIKeyModelAdmin
from rest_framework_api_key.models import APIKey

from clients.models import ApiClient, IdempotencyRecord
from clients.rates import parse_rate
from clients.scopes import Scope, default_scopes
from clients.services import api_client_revoke
from core.admin_tools import LargeTableAdmin, LargeTablePaginator


class ApiClientForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(choices=Scope.choices, widget=forms.CheckboxSelectMultiple,
                                       initial=default_scopes)

    class Meta:
        model = ApiClient
        fields = ["name", "scopes", "rate_limit", "endpoint_rate_limits", "expiry_date", "revoked"]

    def clean_endpoint_rate_limits(self) -> dict:
        value = self.cleaned_data["endpoint_rate_limits"] or {}
        if not isinstance(value, dict):
            raise forms.ValidationError('A JSON object such as {"send": "10/s"}.')
        for rate in value.values():
            try:
                parse_rate(str(rate))
            except ValueError as exc:
                raise forms.ValidationError(str(exc)) from exc
        return value


# The library's own key model is not ours: a key made under its "API keys" page opens nothing.
# Keys are API clients (below).
admin.site.unregister(APIKey)


@admin.register(ApiClient)
class ApiClientAdmin(APIKeyModelAdmin):
    form = ApiClientForm
    list_display = ["prefix", "name", "scope_list", "rate_limit", "created", "last_used_at",
                    "expiry_date", "revoked"]
    list_filter = ["revoked"]
    search_fields = ["name", "prefix"]
    actions = ["revoke"]
    paginator = LargeTablePaginator
    show_full_result_count = False

    @admin.display(description="scopes")
    def scope_list(self, client: ApiClient) -> str:
        return ", ".join(client.scopes or [])

    @admin.action(description="Revoke selected clients (cannot be undone)")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiClient]) -> None:
        for client in queryset:
            api_client_revoke(client=client)
        self.message_user(request, f"Revoked {queryset.count()} client(s).", messages.WARNING)


@admin.register(IdempotencyRecord)
class IdempotencyRecordAdmin(LargeTableAdmin):
    list_display = ["key", "client", "status_code", "created_at", "expires_at"]
    raw_id_fields = ["client"]
    search_fields = ["key"]
    readonly_fields = ["client", "key", "fingerprint", "status_code", "response_body", "locked_at",
                       "created_at", "expires_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
