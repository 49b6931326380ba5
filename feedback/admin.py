"""Operators' views of what the ESPs reported. Events, counters and webhook requests are written
only by the webhook processing: read-only here (`SystemWrittenAdmin`); re-processing pending
requests is an action over the same service the sweep uses."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from core.admin_tools import SystemWrittenAdmin
from feedback.models import CampaignEventCounter, EmailEvent, ReputationHold, WebhookDelivery
from feedback.services.webhooks import webhook_delivery_enqueue


@admin.register(EmailEvent)
class EmailEventAdmin(SystemWrittenAdmin):
    list_display = ["provider", "event_type", "bounce_type", "recipient", "message", "occurred_at"]
    list_filter = ["provider", "event_type"]
    search_fields = ["recipient", "provider_event_id"]
    raw_id_fields = ["message"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(SystemWrittenAdmin):
    list_display = ["id", "provider", "kind", "status", "events_total", "events_new", "events_unknown",
                    "received_at"]
    list_filter = ["provider", "status", "kind"]
    actions = ["requeue"]

    @admin.action(description="Process pending requests again", permissions=["operate"])
    def requeue(self, request: HttpRequest, queryset: QuerySet[WebhookDelivery]) -> None:
        ids = queryset.filter(status=WebhookDelivery.Status.PENDING).values_list("id", flat=True)
        published = sum(webhook_delivery_enqueue(delivery_id=i) for i in ids)
        self.message_user(request, f"{published} pending webhook requests queued for processing")


@admin.register(CampaignEventCounter)
class CampaignEventCounterAdmin(SystemWrittenAdmin):
    list_display = ["campaign", "delivered", "opened", "clicked", "bounced", "complained", "unsubscribed"]
    raw_id_fields = ["campaign"]


@admin.register(ReputationHold)
class ReputationHoldAdmin(admin.ModelAdmin):
    list_display = ["scope", "campaign", "client", "metric", "rate", "sample", "created_at", "released_at"]
    list_filter = ["scope", "metric"]
    raw_id_fields = ["campaign", "client"]
