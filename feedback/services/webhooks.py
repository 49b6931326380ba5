"""Webhook deliveries: store the verified raw request, then process it on the webhook queue.

The view stores first and answers 2xx only once the row is committed (F9: no webhook is
acknowledged unless stored); the task takes the row id. Processing locks the row, so two copies
of the task (broker redelivery) process it once; event inserts are idempotent anyway.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models.functions import Length
from django.utils import timezone

from core.priorities import WEBHOOK_QUEUE
from core.task_publish import task_publish
from feedback.models import WebhookDelivery
from feedback.normalize import NormalizationError, NormalizedEvent, normalize
from feedback.services.processing import ProcessReport, events_process
from feedback.services.reputation import reputation_check

logger = logging.getLogger(__name__)
Status = WebhookDelivery.Status


def webhook_delivery_store(*, provider: str, body: bytes, kind: str = "notification") -> WebhookDelivery:
    """Persist a verified request (autocommit: the row is durable when this returns).

    Only notifications carry events; a subscription confirmation is stored for the record as
    already processed.
    """
    status = Status.PENDING if kind == "notification" else Status.PROCESSED
    return WebhookDelivery.objects.create(
        provider=provider, kind=kind, body=body.decode("utf-8"), status=status,
        processed_at=None if status == Status.PENDING else timezone.now(),
    )


def webhook_delivery_enqueue(*, delivery_id: int) -> bool:
    """Publish the processing task; a failure is logged (the requeue sweep retries it)."""
    try:
        task_publish("feedback.process_webhook_delivery", args=(delivery_id,), queue=WEBHOOK_QUEUE)
    except Exception:
        logger.exception("could not publish webhook delivery %s; the sweep will", delivery_id)
        return False
    return True


def webhook_delivery_process(*, delivery_id: int) -> ProcessReport | None:
    """Normalise and apply one stored delivery, once, together with other pending ones.

    Mailgun and SNS send one event per request: processing each alone would cost a dozen
    statements per event. So the task for one delivery also takes other pending deliveries
    (up to FEEDBACK_WEBHOOK_COALESCE_BYTES of bodies, SKIP LOCKED) into the same batch; their
    own tasks then find nothing to do. Returns None when there was nothing to do.
    """
    with transaction.atomic():
        deliveries = _deliveries_lock(delivery_id)
        if not deliveries:
            return None  # already processed, or another worker holds it
        events, owner, totals = _normalise_all(deliveries)
        report = events_process(events=events, check_reputation=False)
        _deliveries_mark_processed(report, owner, totals)
    if report.campaigns or report.clients:
        reputation_check(campaign_ids=report.campaigns, client_ids=report.clients)
    return report


def _deliveries_lock(delivery_id: int) -> list[WebhookDelivery]:
    locked = WebhookDelivery.objects.select_for_update(skip_locked=True).filter(status=Status.PENDING)
    first = locked.filter(id=delivery_id).first()
    if first is None:
        return []
    budget = settings.FEEDBACK_WEBHOOK_COALESCE_BYTES - len(first.body)
    sizes = (
        WebhookDelivery.objects.filter(status=Status.PENDING).exclude(id=delivery_id)
        .order_by("id").annotate(size=Length("body")).values_list("id", "size")[:1000]
    )
    chosen = []
    for other_id, size in sizes:
        budget -= size
        if budget < 0:
            break
        chosen.append(other_id)
    return [first, *locked.filter(id__in=chosen).order_by("id")] if chosen else [first]


def _normalise_all(
    deliveries: list[WebhookDelivery],
) -> tuple[list[NormalizedEvent], dict[tuple[str, str], int], dict[int, int]]:
    events: list[NormalizedEvent] = []
    owner: dict[tuple[str, str], int] = {}
    totals: dict[int, int] = {}
    for delivery in deliveries:
        try:
            found = normalize(delivery.provider, json.loads(delivery.body))
        except (NormalizationError, ValueError) as exc:
            logger.warning("webhook delivery %s could not be normalised: %s", delivery.id, exc)
            WebhookDelivery.objects.filter(id=delivery.id).update(
                status=Status.FAILED, error=str(exc)[:2000], processed_at=timezone.now()
            )
            continue
        totals[delivery.id] = len(found)
        for event in found:
            owner.setdefault((event.provider, event.provider_event_id[:255]), delivery.id)
        events += found
    return events, owner, totals


def _deliveries_mark_processed(
    report: ProcessReport, owner: dict[tuple[str, str], int], totals: dict[int, int]
) -> None:
    """One UPDATE per distinct (total, new, unknown) triple: a few per batch, not one per row."""
    new: Counter[int] = Counter()
    unknown: Counter[int] = Counter()
    for stored in report.stored:
        delivery_id = owner[(stored.event.provider, stored.event.provider_event_id[:255])]
        new[delivery_id] += 1
        unknown[delivery_id] += stored.message is None
    groups: dict[tuple[int, int, int], list[int]] = {}
    for delivery_id, total in totals.items():
        groups.setdefault((total, new[delivery_id], unknown[delivery_id]), []).append(delivery_id)
    now = timezone.now()
    for (total, n_new, n_unknown), ids in groups.items():
        WebhookDelivery.objects.filter(id__in=ids).update(
            status=Status.PROCESSED, processed_at=now, events_total=total, events_new=n_new,
            events_unknown=n_unknown,
        )


def webhook_deliveries_requeue(*, older_than_seconds: int = 60, limit: int = 1000) -> int:
    """Publish again deliveries still pending after a while (their task was lost)."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    ids = list(
        WebhookDelivery.objects.filter(status=Status.PENDING, received_at__lt=cutoff)
        .order_by("id")
        .values_list("id", flat=True)[:limit]
    )
    return sum(webhook_delivery_enqueue(delivery_id=i) for i in ids)
