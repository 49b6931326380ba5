"""Operators' view of the services' callback endpoints and their delivery logs.

Endpoints are registered by the services (the API); here an operator sees which are failing or
disabled and may enable (it catches up from the event log) or disable one. Secrets are never
shown. The delivery log is written only by the deliveries: read-only.
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from callbacks.models import EndpointDelivery, WebhookEndpoint
from callbacks.services.endpoints import endpoint_update
from core.admin_tools import SystemWrittenAdmin


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    list_display = ["id", "service", "url", "enabled", "disabled_reason", "failing_since", "failed_attempts",
                    "created_at"]
    list_filter = ["enabled", "disabled_reason"]
    search_fields = ["url", "=service__id"]
    fields = ["service", "url", "event_types", "enabled", "disabled_reason", "disabled_at", "failing_since",
              "failed_attempts", "next_attempt_at", "cursor_txid", "cursor_id", "previous_secret_expires_at",
              "created_at"]
    readonly_fields = fields
    actions = ["enable", "disable"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a service registers its own (POST /api/v1/webhooks): the secret goes to it

    @admin.action(description="Enable (catches up from the event log)", permissions=["change"])
    def enable(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]) -> None:
        for endpoint in queryset:
            endpoint_update(endpoint=endpoint, changes={"enabled": True})
        self.message_user(request, f"{len(queryset)} endpoints enabled")

    @admin.action(description="Disable", permissions=["change"])
    def disable(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]) -> None:
        for endpoint in queryset:
            endpoint_update(endpoint=endpoint, changes={"enabled": False})
        self.message_user(request, f"{len(queryset)} endpoints disabled")


@admin.register(EndpointDelivery)
class EndpointDeliveryAdmin(SystemWrittenAdmin):
    list_display = ["id", "endpoint", "attempt", "status_code", "latency_ms", "error", "created_at"]
    list_filter = ["status_code"]
    raw_id_fields = ["endpoint"]
