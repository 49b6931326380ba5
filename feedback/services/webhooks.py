"""Webhook deliveries: store the verified raw request, then process it on the webhook queue.

The view stores first and answers 2xx only once the row is committed (F9: no webhook is
acknowledged unless stored); the task takes the row id. Processing locks the row, so two copies
of the task (broker redelivery) process it once; event inserts are idempotent anyway.
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from feedback.models import WebhookDelivery
from feedback.normalize import NormalizationError, normalize
from feedback.services.processing import ProcessReport, events_process
from notifier.priorities import WEBHOOK_QUEUE

logger = logging.getLogger(__name__)
Status = WebhookDelivery.Status


def webhook_delivery_store(*, provider: str, body: bytes, kind: str = "notification") -> WebhookDelivery:
    """Persist a verified request (autocommit: the row is durable when this returns)."""
    return WebhookDelivery.objects.create(provider=provider, kind=kind, body=body.decode("utf-8"))


def webhook_delivery_enqueue(*, delivery_id: int) -> bool:
    """Publish the processing task; a failure is logged (the requeue sweep retries it)."""
    from feedback.tasks import process_webhook_delivery

    try:
        process_webhook_delivery.apply_async(args=(delivery_id,), queue=WEBHOOK_QUEUE)
    except Exception:
        logger.exception("could not publish webhook delivery %s; the sweep will", delivery_id)
        return False
    return True


def webhook_delivery_process(*, delivery_id: int) -> ProcessReport | None:
    """Normalise and apply one stored delivery, once."""
    with transaction.atomic():
        delivery = (
            WebhookDelivery.objects.select_for_update(skip_locked=True)
            .filter(id=delivery_id, status=Status.PENDING)
            .first()
        )
        if delivery is None:
            return None  # already processed, or another worker holds it
        try:
            events = normalize(delivery.provider, json.loads(delivery.body))
        except (NormalizationError, ValueError) as exc:
            delivery.status, delivery.error = Status.FAILED, str(exc)[:2000]
            delivery.processed_at = timezone.now()
            delivery.save(update_fields=["status", "error", "processed_at"])
            logger.warning("webhook delivery %s could not be normalised: %s", delivery_id, exc)
            return None
        report = events_process(events=events)
        WebhookDelivery.objects.filter(id=delivery_id).update(
            status=Status.PROCESSED, processed_at=timezone.now(), events_total=report.total,
            events_new=report.new, events_unknown=report.unknown,
        )
    return report


def webhook_deliveries_requeue(*, older_than_seconds: int = 60, limit: int = 1000) -> int:
    """Publish again deliveries still pending after a while (their task was lost)."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    ids = list(
        WebhookDelivery.objects.filter(status=Status.PENDING, received_at__lt=cutoff)
        .order_by("id")
        .values_list("id", flat=True)[:limit]
    )
    return sum(webhook_delivery_enqueue(delivery_id=i) for i in ids)
