"""GET /api/v1/stats/overview and the dashboard's data: one read model for both."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Count
from django.db.models.functions import TruncMinute
from django.utils import timezone

from analytics.selectors.queues import (
    live_workers,
    minute_buckets,
    priority_queues,
    provider_health,
    throughput_last_hour,
)
from delivery.services.sandbox import SANDBOX_PROVIDER
from feedback.models import EmailEvent, WebhookDelivery


def webhook_summary() -> dict[str, Any]:
    now = timezone.now()
    since = now - timedelta(hours=1)
    # Live figures: the sandbox's simulated events of test messages (issue 27) are not counted.
    events = EmailEvent.objects.filter(received_at__gte=since).exclude(provider=SANDBOX_PROVIDER)
    per_minute: dict[str, dict[str, int]] = {t: {} for t in minute_buckets(since=since, now=now)}
    minutes = events.annotate(t=TruncMinute("received_at"))
    rows = minutes.values_list("t", "event_type").annotate(n=Count("id"))
    for at, event_type, n in rows:
        per_minute.setdefault(at.isoformat(), {})[event_type] = n
    return {
        "pending_deliveries": WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING).count(),
        "failed_deliveries": WebhookDelivery.objects.filter(status=WebhookDelivery.Status.FAILED).count(),
        "events_last_hour": dict(events.values_list("event_type").annotate(n=Count("id"))),
        "unknown_message_events_last_hour": events.filter(message__isnull=True).count(),
        "per_minute": [{"t": t, **v} for t, v in sorted(per_minute.items())],
    }


def stats_overview() -> dict[str, Any]:
    queues = priority_queues()
    workers = live_workers()
    for entry in queues:
        entry["workers"] = workers.get(entry["queue"], [])
    providers = provider_health()
    return {
        "generated_at": timezone.now().isoformat(),
        "throughput": throughput_last_hour(),
        "queues": queues,
        "workers": workers,
        "providers": providers,
        "webhooks": webhook_summary(),
        "alerts": {
            # A provider fault or error rate counts: a queue can look healthy while its
            # messages are all refused.
            "overall": _worst([q["alert"] for q in queues] + [p["alert"] for p in providers]),
            "per_priority": {q["priority"]: q["alert"] for q in queues},
            "per_provider": {p["provider"]: p["alert"] for p in providers},
        },
    }


def _worst(levels: list[str]) -> str:
    return "critical" if "critical" in levels else "warning" if "warning" in levels else "ok"
