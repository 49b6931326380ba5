"""GET /api/v1/stats/overview and the dashboard's data: one read model for both."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone

from analytics.selectors.campaign_stats import UtcMinute
from analytics.selectors.kept_minutes import (
    Counts,
    MinuteSeries,
    series_forget,
    series_keep,
    series_window,
    summed,
)
from analytics.selectors.queues import (
    PROVIDER_CALLS,
    SENDS,
    live_workers,
    priority_queues,
    provider_health,
    throughput_last_hour,
)
from core import live_counts
from core.live_counts import UNKNOWN_MESSAGE
from delivery.services.sandbox import SANDBOX_PROVIDER
from feedback.models import EmailEvent, WebhookDelivery


def events_per_minute(since: datetime, until: datetime | None = None) -> dict[datetime, Counts]:
    """Live webhook events per UTC minute of receipt and event type from `since` (to `until`),
    with UNKNOWN_MESSAGE; one GROUP BY over event_received_idx. The sandbox's simulated events of
    test messages (issue 27) are not counted."""
    events = EmailEvent.objects.filter(received_at__gte=since).exclude(provider=SANDBOX_PROVIDER)
    if until is not None:
        events = events.filter(received_at__lt=until)
    rows = events.annotate(t=UtcMinute("received_at")).values_list("t", "event_type").annotate(
        n=Count("id"), unknown=Count("id", filter=Q(message__isnull=True)))
    per_minute: dict[datetime, Counts] = {}
    for minute, event_type, n, unknown in rows.order_by():
        counts = per_minute.setdefault(minute, {})
        counts[event_type] = n
        counts[UNKNOWN_MESSAGE] = counts.get(UNKNOWN_MESSAGE, 0) + unknown
    return per_minute


EVENTS = MinuteSeries(live_counts.EVENTS, timedelta(hours=1), events_per_minute)
LIVE_SERIES = (SENDS, EVENTS, PROVIDER_CALLS)


def webhook_summary() -> dict[str, Any]:
    """Webhook deliveries waiting or failed, and the events received over the last hour (whole
    UTC minutes, the settled ones kept as the sends are: kept_minutes.py)."""
    window = series_window(EVENTS)
    totals = summed(window)
    unknown = totals.pop(UNKNOWN_MESSAGE, 0)
    per_minute = [{"t": m.isoformat(), **{k: n for k, n in window[m].items() if k != UNKNOWN_MESSAGE}}
                  for m in sorted(window)]
    return {
        "pending_deliveries": WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING).count(),
        "failed_deliveries": WebhookDelivery.objects.filter(status=WebhookDelivery.Status.FAILED).count(),
        "events_last_hour": {event_type: n for event_type, n in totals.items() if n},
        "unknown_message_events_last_hour": unknown,
        "per_minute": per_minute,
    }


def live_minutes_keep() -> dict[str, int]:
    """Keep every live series' settled minutes (the beat, every minute): minutes newly kept."""
    return {series.name: series_keep(series) for series in LIVE_SERIES}


def live_minutes_forget() -> None:
    """Forget every live series' kept minutes (tests, the bench's cold call)."""
    for series in LIVE_SERIES:
        series_forget(series)


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
