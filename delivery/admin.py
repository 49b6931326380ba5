"""Admin: messages (with reconciliation), the ambiguity log, dead letters (requeue), run-time
rate limits.

Actions are one-liners over the same services the tasks and commands use.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import Q

from core.admin_tools import LargeTableAdmin
from delivery.models import (
    AmbiguityRecord,
    DeadLetter,
    DeliveryAttempt,
    EmailMessage,
    ProviderEventCoverage,
    RateLimit,
)
from delivery.services.dead_letters import dead_letter_requeue
from delivery.services.reconcile import message_reconcile


class DeliveryAttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    extra = 0
    can_delete = False
    readonly_fields = ("provider", "outcome", "response_code", "error", "duration_ms", "created_at")


@admin.register(EmailMessage)
class EmailMessageAdmin(LargeTableAdmin):
    list_display = ("id", "recipient", "status", "priority", "provider", "attempts", "created_at")
    list_filter = ("status", "priority", "provider")
    # Exact matches only: each is an indexed lookup, where icontains would scan millions of rows.
    search_fields = ("=recipient", "=provider_message_id", "=idempotency_key")
    raw_id_fields = ("campaign", "client", "contact", "template_version")
    inlines = [DeliveryAttemptInline]
    actions = ["reconcile_accepted", "reconcile_not_accepted"]

    def exact_match(self, field: str, values: list[str]) -> Q:
        """The recipient index holds only rows of no contact (decision 64): a contact's rows (the
        fan-out's, recipient = the contact's address, its identity) are found by the contact."""
        if field != "recipient":
            return super().exact_match(field, values)
        contact = EmailMessage._meta.get_field("contact").related_model
        clients = contact._meta.get_field("client").related_model.objects.values("pk")
        # Per client: the contact index is (client, email), one probe per client.
        of_address = contact.objects.filter(client__in=clients, email__in=[v.lower() for v in values])
        # Ids, not a subquery: `contact_id IN (ids)` joins the other fields' index scans in one
        # BitmapOr, where a subplan in the OR forces a scan of the message table.
        contact_ids = list(of_address.values_list("pk", flat=True))
        return Q(recipient__in=values, contact__isnull=True) | Q(contact__in=contact_ids)

    @admin.action(description="Reconcile AMBIGUOUS: the ESP accepted it (mark SENT)")
    def reconcile_accepted(self, request, queryset) -> None:
        done = sum(message_reconcile(message_id=m.id, accepted=True, provider=m.provider or "unknown")
                   for m in queryset)
        self.message_user(request, f"{done} messages marked SENT", messages.SUCCESS)

    @admin.action(description="Reconcile AMBIGUOUS: the ESP never took it (send again)")
    def reconcile_not_accepted(self, request, queryset) -> None:
        done = sum(message_reconcile(message_id=m.id, accepted=False, provider=m.provider)
                   for m in queryset)
        self.message_user(request, f"{done} messages queued again", messages.SUCCESS)


@admin.register(DeadLetter)
class DeadLetterAdmin(LargeTableAdmin):
    list_display = ("id", "message", "final_error", "created_at", "requeued_at")
    list_filter = ("requeued_at",)
    raw_id_fields = ("message",)
    readonly_fields = ("message", "payload", "attempts", "final_error", "created_at", "requeued_at")
    actions = ["requeue"]

    @admin.action(description="Requeue (send again, once)")
    def requeue(self, request, queryset) -> None:
        done = sum(dead_letter_requeue(dead_letter_id=d.id) for d in queryset)
        self.message_user(request, f"{done} dead letters requeued", messages.SUCCESS)


@admin.register(AmbiguityRecord)
class AmbiguityRecordAdmin(LargeTableAdmin):
    """The ambiguity log (decision 89): read only, written by the send path and the recovery."""

    list_display = ("id", "message_id", "kind", "reason", "provider", "created_at")
    list_filter = ("kind", "reason", "provider")
    search_fields = ("=message_id",)
    readonly_fields = ("message_id", "kind", "reason", "provider", "evidence", "created_at")

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(ProviderEventCoverage)
class ProviderEventCoverageAdmin(admin.ModelAdmin):
    list_display = ("provider", "sent_until", "updated_at")
    readonly_fields = ("provider", "sent_until", "updated_at")


@admin.register(RateLimit)
class RateLimitAdmin(admin.ModelAdmin):
    list_display = ("scope", "name", "per_second", "burst", "enabled", "updated_at")
    list_editable = ("per_second", "burst", "enabled")
    list_filter = ("scope", "enabled")
