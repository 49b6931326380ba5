"""Admin: messages (cancel, reconcile), the ambiguity log, dead letters (requeue), run-time
rate limits.

Messages, attempts, dead letters and the ambiguity log are written only by the system: they are
read-only here (`SystemWrittenAdmin`), and what an operator may do to them is an action over the
same ledger services the tasks and commands use, which names the state each row must be in.
Each action reports what it changed and what it left, and why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import Q, QuerySet
from django.http import HttpRequest

from core.admin_tools import LargeTableAdmin, NeverWritten, SystemWrittenAdmin
from core.personal_data import recipient_hash
from delivery.models import (
    AmbiguityRecord,
    DeadLetter,
    DeliveryAttempt,
    EmailMessage,
    ProviderEventCoverage,
    RateLimit,
)
from delivery.services import ledger
from delivery.services.dead_letters import dead_letter_requeue
from delivery.services.reconcile import message_reconcile

Status = EmailMessage.Status
# An action over more rows than this is refused: each row is its own guarded write.
ACTION_LIMIT = 500


def _report(modeladmin: admin.ModelAdmin, request: HttpRequest, done: list[int], left: list[int],
            *, did: str, why_left: str) -> None:
    """One line for what changed and one for what was left as it was (with why)."""
    if done:
        modeladmin.message_user(request, f"{len(done)} {did}: {_ids(done)}.", messages.SUCCESS)
    if left:
        modeladmin.message_user(request, f"{len(left)} left unchanged ({why_left}): {_ids(left)}.",
                                messages.WARNING)


def _ids(ids: list[int]) -> str:
    shown = ", ".join(f"#{pk}" for pk in ids[:20])
    return shown + (f" and {len(ids) - 20} more" if len(ids) > 20 else "")


def _each(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet,
          change: Callable[[Any], bool]) -> tuple[list[int], list[int]] | None:
    """Apply `change` to each selected row, in id order: (changed ids, unchanged ids), or None
    if too many are selected ("select all" on a big table)."""
    rows = list(queryset.order_by("pk")[: ACTION_LIMIT + 1])
    if len(rows) > ACTION_LIMIT:
        modeladmin.message_user(request, f"Select at most {ACTION_LIMIT} rows for this action "
                                "(the command line handles more).", messages.ERROR)
        return None
    done, left = [], []
    for row in rows:
        (done if change(row) else left).append(row.pk)
    return done, left


class DeliveryAttemptInline(NeverWritten, admin.TabularInline):
    """Attempt rows are the send path's record of each provider call: shown, never written here."""

    model = DeliveryAttempt
    extra = 0
    readonly_fields = ("provider", "outcome", "response_code", "error", "duration_ms", "created_at")


@admin.register(EmailMessage)
class EmailMessageAdmin(SystemWrittenAdmin, LargeTableAdmin):
    list_display = ("id", "recipient", "status", "priority", "provider", "attempts", "created_at")
    list_filter = ("status", "priority", "provider")
    # Exact matches only: each is an indexed lookup, where icontains would scan millions of rows.
    search_fields = ("=recipient", "=provider_message_id", "=idempotency_key")
    raw_id_fields = ("campaign", "client", "contact", "template_version")
    # When the service's retention removed the address and context (decision 120).
    readonly_fields = ("personal_data_removed_at",)
    inlines = [DeliveryAttemptInline]
    actions = ["cancel", "reconcile_accepted", "reconcile_not_accepted"]

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
        # Rows past their personal retention keep only the address's keyed hash (decision
        # 120): one probe of msg_client_recipient_hash_idx per service.
        hashed = Q(client__in=list(clients.values_list("pk", flat=True)), contact__isnull=True,
                   recipient_hash__in=[recipient_hash(value) for value in values if "@" in value])
        return Q(recipient__in=values, contact__isnull=True) | Q(contact__in=contact_ids) | hashed

    @admin.action(description="Cancel: not sent yet (queued, scheduled or claimed), never send it",
                  permissions=["operate"])
    def cancel(self, request: HttpRequest, queryset: QuerySet[EmailMessage]) -> None:
        reason = f"cancelled by {request.user.get_username()} in the admin"
        result = _each(self, request, queryset,
                       lambda m: ledger.message_unsent_cancel(message_id=m.pk, reason=reason))
        if result:
            _report(self, request, *result, did="cancelled",
                    why_left="already handed to a provider or finished")

    @admin.action(description="Reconcile AMBIGUOUS: the ESP accepted it (mark SENT)",
                  permissions=["operate"])
    def reconcile_accepted(self, request: HttpRequest, queryset: QuerySet[EmailMessage]) -> None:
        # AMBIGUOUS rows only: the service would also settle a row still SENDING after its
        # hand-off (an ESP event may beat our own timeout), which an operator cannot know of.
        result = _each(self, request, queryset, lambda m: m.status == Status.AMBIGUOUS and (
            message_reconcile(message_id=m.pk, accepted=True, provider=m.provider or "unknown")))
        if result:
            _report(self, request, *result, did="marked SENT", why_left="not AMBIGUOUS")

    @admin.action(description="Reconcile AMBIGUOUS: the ESP never took it (send again)",
                  permissions=["operate"])
    def reconcile_not_accepted(self, request: HttpRequest, queryset: QuerySet[EmailMessage]) -> None:
        result = _each(self, request, queryset,
                       lambda m: message_reconcile(message_id=m.pk, accepted=False, provider=m.provider))
        if result:
            _report(self, request, *result, did="queued to be sent again", why_left="not AMBIGUOUS")


@admin.register(DeadLetter)
class DeadLetterAdmin(SystemWrittenAdmin, LargeTableAdmin):
    list_display = ("id", "message", "final_error", "created_at", "requeued_at")
    list_filter = ("requeued_at",)
    raw_id_fields = ("message",)
    actions = ["requeue"]

    @admin.action(description="Requeue (send again, once)", permissions=["operate"])
    def requeue(self, request: HttpRequest, queryset: QuerySet[DeadLetter]) -> None:
        result = _each(self, request, queryset,
                       lambda d: dead_letter_requeue(dead_letter_id=d.pk))
        if result:
            _report(self, request, *result, did="dead letters requeued",
                    why_left="requeued before, or the message is no longer FAILED")


@admin.register(AmbiguityRecord)
class AmbiguityRecordAdmin(SystemWrittenAdmin, LargeTableAdmin):
    """The ambiguity log (decision 89): read only, written by the send path and the recovery."""

    list_display = ("id", "message_id", "kind", "reason", "provider", "created_at")
    list_filter = ("kind", "reason", "provider")
    search_fields = ("=message_id",)


@admin.register(ProviderEventCoverage)
class ProviderEventCoverageAdmin(SystemWrittenAdmin):
    list_display = ("provider", "sent_until", "updated_at")


@admin.register(RateLimit)
class RateLimitAdmin(admin.ModelAdmin):
    list_display = ("scope", "name", "per_second", "burst", "enabled", "updated_at")
    list_editable = ("per_second", "burst", "enabled")
    list_filter = ("scope", "enabled")
