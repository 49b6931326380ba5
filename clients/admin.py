"""Services and their keys in the admin: a service with its keys and team list; keys created
here are shown once (with their type prefix); revoke is an action that cannot be undone."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from rest_framework_api_key.admin import APIKeyModelAdmin
from rest_framework_api_key.models import APIKey

from clients.admin_columns import ScopeListMixin
from clients.key_format import key_for_wire
from clients.models import ApiKey, IdempotencyRecord, Service, TeamMember
from clients.rates import parse_rate
from clients.retention import (
    FIELDS,
    MAX_DAYS,
    STREAMS,
    RetentionRefusedError,
    retention_defaults,
    retention_replaced,
)
from clients.scopes import Scope, default_scopes
from clients.services import KeyRefusedError, api_key_revoke, rate_not_above_service, scopes_within_service
from core.admin_tools import LargeTableAdmin, LargeTablePaginator


def _checked_rates(value: object) -> dict:
    value = value or {}
    if not isinstance(value, dict):
        raise forms.ValidationError('A JSON object such as {"send": "10/s"}.')
    for rate in value.values():
        try:
            parse_rate(str(rate))
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc
    return value


def _retention_field(stream: str, name: str) -> str:
    return f"retention_{stream}_{name}"


def _days() -> forms.IntegerField:
    return forms.IntegerField(required=False, min_value=1, max_value=MAX_DAYS)


class ServiceForm(forms.ModelForm):
    """A service, with its retention as four day counts (clients/retention.py): empty follows
    the default, a value is the service's own; checked as PATCH /api/v1/service checks it."""

    scopes = forms.MultipleChoiceField(choices=Scope.choices, widget=forms.CheckboxSelectMultiple,
                                       initial=default_scopes)
    retention_transactional_personal_data_days = _days()
    retention_transactional_metadata_days = _days()
    retention_broadcast_personal_data_days = _days()
    retention_broadcast_metadata_days = _days()

    class Meta:
        model = Service
        fields = ["name", "scopes", "rate_limit", "endpoint_rate_limits"]

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        defaults = retention_defaults()
        stored = self.instance.retention or {}
        for stream in STREAMS:
            for name in FIELDS:
                field = self.fields[_retention_field(stream, name)]
                field.label = f"{stream.capitalize()}: {name.replace('_', ' ')}"
                field.help_text = f"Empty: the default ({getattr(defaults, name)} days)."
                field.initial = (stored.get(stream) or {}).get(name)

    def clean_endpoint_rate_limits(self) -> dict:
        return _checked_rates(self.cleaned_data["endpoint_rate_limits"])

    def clean(self) -> dict:
        cleaned = super().clean()
        stored = {stream: {name: cleaned[_retention_field(stream, name)] for name in FIELDS
                           if cleaned.get(_retention_field(stream, name)) is not None}
                  for stream in STREAMS}
        try:
            # Checked as PATCH /service checks a change: a shortened personal retention against
            # the service's pending schedules.
            self.instance.retention = retention_replaced(self.instance, stored)
        except RetentionRefusedError as exc:
            stream, name = exc.field.split(".")[1:3]
            self.add_error(_retention_field(stream, name), str(exc))
        return cleaned


class ApiKeyForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(choices=Scope.choices, widget=forms.CheckboxSelectMultiple,
                                       initial=default_scopes)

    class Meta:
        model = ApiKey
        fields = ["service", "name", "key_type", "scopes", "rate_limit", "endpoint_rate_limits",
                  "expiry_date", "revoked"]

    def clean_endpoint_rate_limits(self) -> dict:
        return _checked_rates(self.cleaned_data["endpoint_rate_limits"])

    def clean(self) -> dict:
        cleaned = super().clean()
        service = cleaned.get("service")
        if service is not None:
            try:
                scopes_within_service(service, cleaned.get("scopes"))
                rate_not_above_service(service, cleaned.get("rate_limit") or "")
            except KeyRefusedError as exc:
                self.add_error(exc.field, str(exc))
        return cleaned


class TeamMemberInline(admin.TabularInline):
    model = TeamMember
    extra = 1


class ApiKeyInline(admin.TabularInline):
    """The service's keys at a glance; a key is made and revoked on its own page."""

    model = ApiKey
    fields = ["prefix", "name", "key_type", "scopes", "created", "last_used_at", "expiry_date",
              "revoked"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


# The library's own key model is not ours: a key made under its "API keys" page opens nothing.
admin.site.unregister(APIKey)


@admin.register(Service)
class ServiceAdmin(ScopeListMixin, admin.ModelAdmin):
    form = ServiceForm
    list_display = ["name", "id", "scope_list", "rate_limit", "created"]
    search_fields = ["name", "id", "api_keys__prefix"]
    readonly_fields = ["id", "created"]
    inlines = [ApiKeyInline, TeamMemberInline]
    fieldsets = [
        (None, {"fields": ["id", "name", "scopes", "rate_limit", "endpoint_rate_limits", "created"]}),
        ("Retention (days; decision 120)", {
            "description": "Personal data: the recipient's address, context and the ESP's payloads "
                           "are removed from messages older than this (the rows and counts stay). "
                           "Metadata: older messages and events are hidden from the service's API.",
            "fields": [_retention_field(stream, name) for stream in STREAMS for name in FIELDS]}),
    ]


@admin.register(ApiKey)
class ApiKeyAdmin(ScopeListMixin, APIKeyModelAdmin):
    form = ApiKeyForm
    list_display = ["prefix", "name", "service", "key_type", "scope_list", "created",
                    "last_used_at", "expiry_date", "revoked"]
    list_filter = ["key_type", "revoked"]
    list_select_related = ["service"]
    search_fields = ["name", "prefix", "service__name"]
    autocomplete_fields = ["service"]
    actions = ["revoke"]
    paginator = LargeTablePaginator
    show_full_result_count = False

    def save_model(self, request: HttpRequest, obj: ApiKey, form: object = None,
                   change: bool = False) -> None:
        if change:
            obj.save()
            return
        obj.created_by = f"admin:{request.user.get_username()}"
        library_key = ApiKey.objects.assign_key(obj)
        obj.save()
        key = key_for_wire(obj.key_type, library_key)
        self.message_user(request, f"New API key {obj.name}: {key} (store it somewhere safe: it "
                                   "is not shown again).", messages.WARNING)

    @admin.action(description="Revoke selected keys (cannot be undone)")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for api_key in queryset:
            api_key_revoke(api_key=api_key)
        self.message_user(request, f"Revoked {queryset.count()} key(s).", messages.WARNING)


@admin.register(IdempotencyRecord)
class IdempotencyRecordAdmin(LargeTableAdmin):
    list_display = ["key", "client", "status_code", "created_at", "expires_at"]
    raw_id_fields = ["client"]
    search_fields = ["key"]
    readonly_fields = ["client", "key", "fingerprint", "status_code", "response_body", "locked_at",
                       "created_at", "expires_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
