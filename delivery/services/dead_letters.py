"""The dead-letter store: messages that used up their attempts, kept with everything tried.

`messages_dead_letter` moves rows this task owns from SENDING to FAILED and writes one
DeadLetter each (payload, every DeliveryAttempt, final error). `dead_letter_requeue` sends one
again exactly once: under a row lock it stamps `requeued_at`, moves the message FAILED -> QUEUED
with a fresh attempt budget, and publishes it after commit. A second requeue of the same dead
letter (double click, two operators, a re-run command) finds `requeued_at` set and does nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.db import transaction
from django.utils import timezone

from delivery.models import DeadLetter, DeliveryAttempt, EmailMessage
from delivery.services import ledger
from delivery.services.dispatch import messages_enqueue
from eventlog.types import EventType

logger = logging.getLogger(__name__)
Status = EmailMessage.Status


def _payload(message: EmailMessage) -> dict:
    return {
        "recipient": message.recipient,
        "template_version_id": message.template_version_id,
        "context": message.context,
        "priority": message.priority,
        "campaign_id": message.campaign_id,
        "idempotency_key": message.idempotency_key,
    }


def _attempts(message_id: int) -> list[dict]:
    rows = DeliveryAttempt.objects.filter(message_id=message_id).order_by("id")
    return [
        {"provider": a.provider, "outcome": a.outcome, "response_code": a.response_code,
         "error": a.error, "duration_ms": a.duration_ms, "at": a.created_at.isoformat()}
        for a in rows
    ]


def messages_dead_letter(*, message_ids: Sequence[int], token: str, error: str) -> int:
    """SENDING -> FAILED plus a DeadLetter row each; returns how many were dead-lettered."""
    if not message_ids:
        return 0
    with transaction.atomic():
        owned = list(
            EmailMessage.objects.select_for_update().filter(
                id__in=message_ids, status__unindexed=Status.SENDING, claim_token=token
            )
        )
        final = f"dead-lettered: {error}"
        changed = ledger.messages_mark_final(
            message_ids=[m.id for m in owned], token=token, status=Status.FAILED, error=final,
            event=EventType.DEAD_LETTERED,
        )
        DeadLetter.objects.bulk_create(
            DeadLetter(message=m, payload=_payload(m), attempts=_attempts(m.id), final_error=error[:2000])
            for m in owned
        )
    if changed:
        logger.warning("dead-lettered %d messages: %s", changed, error)
    return changed


def dead_letter_requeue(*, dead_letter_id: int) -> bool:
    """Send a dead letter again, exactly once; False when it was already requeued."""
    with transaction.atomic():
        dead = (
            DeadLetter.objects.select_for_update()
            .filter(id=dead_letter_id, requeued_at__isnull=True)
            .first()
        )
        if dead is None:
            return False
        dead.requeued_at = timezone.now()
        dead.save(update_fields=["requeued_at"])
        priority = ledger.failed_message_requeue(
            message_id=dead.message_id, error="requeued from dead letter")
        if priority is not None:
            transaction.on_commit(
                lambda: messages_enqueue(message_ids=[dead.message_id], priority=priority)
            )
    return priority is not None
