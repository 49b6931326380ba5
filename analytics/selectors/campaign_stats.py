"""Campaign analytics: counts, rates, per provider and a time series (reads only)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from django.db.models import Count
from django.db.models.functions import TruncHour, TruncMinute

from campaigns.models import Campaign
from campaigns.selectors import campaign_progress
from delivery.models import EmailMessage
from feedback.models import CampaignEventCounter, EmailEvent, MessageEventMark

INTERVALS = {"minute": TruncMinute, "hour": TruncHour}
COUNTED = ("delivered", "opened", "clicked", "bounced", "soft_bounced", "complained", "unsubscribed")


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 6) if whole else 0.0


def campaign_counts(*, campaign: Campaign) -> dict[str, int]:
    by_status = dict(
        EmailMessage.objects.filter(campaign=campaign).values_list("status").annotate(n=Count("id"))
    )
    counter = CampaignEventCounter.objects.filter(campaign=campaign).first()
    counts = {name: getattr(counter, name, 0) for name in COUNTED}
    counts["messages"] = sum(by_status.values())
    # Progress against the whole audience, as on the dashboard and in the campaign API.
    counts.update(campaign_progress(campaign=campaign, by_status=by_status))
    counts["sent"] = EmailMessage.objects.filter(campaign=campaign, sent_at__isnull=False).count()
    counts["pending"] = sum(by_status.get(s, 0) for s in ("QUEUED", "SCHEDULED", "SENDING"))
    counts["failed"] = by_status.get("FAILED", 0)
    counts["suppressed"] = by_status.get("SUPPRESSED", 0)
    return counts


def campaign_rates(counts: dict[str, int]) -> dict[str, float]:
    sent, delivered = counts["sent"], counts["delivered"]
    return {
        "delivery": _rate(delivered, sent),
        "open": _rate(counts["opened"], delivered),
        "click": _rate(counts["clicked"], delivered),
        "bounce": _rate(counts["bounced"], sent),
        "complaint": _rate(counts["complained"], delivered),
        "unsubscribe": _rate(counts["unsubscribed"], delivered),
    }


def campaign_providers(*, campaign: Campaign) -> dict[str, dict[str, int]]:
    sent = (
        EmailMessage.objects.filter(campaign=campaign, sent_at__isnull=False)
        .values_list("provider").annotate(n=Count("id"))
    )
    providers: dict[str, dict[str, int]] = {p or "unknown": {"sent": n} for p, n in sent}
    marks = (
        MessageEventMark.objects.filter(message__campaign=campaign)
        .values_list("message__provider", "event_type").annotate(n=Count("id"))
    )
    for provider, event_type, n in marks:
        providers.setdefault(provider or "unknown", {"sent": 0})[event_type] = n
    return providers


def campaign_series(*, campaign: Campaign, interval: str, since: datetime | None) -> list[dict[str, Any]]:
    trunc = INTERVALS[interval]
    sends = EmailMessage.objects.filter(campaign=campaign, sent_at__isnull=False)
    events = EmailEvent.objects.filter(message__campaign=campaign)
    if since is not None:
        sends, events = sends.filter(sent_at__gte=since), events.filter(occurred_at__gte=since)
    buckets: dict[datetime, dict[str, int]] = {}
    for at, n in sends.annotate(t=trunc("sent_at")).values_list("t").annotate(n=Count("id")):
        buckets.setdefault(at, {})["sent"] = n
    rows = events.annotate(t=trunc("occurred_at")).values_list("t", "event_type").annotate(n=Count("id"))
    for at, event_type, n in rows:
        buckets.setdefault(at, {})[event_type] = n
    return [{"t": at.isoformat(), **values} for at, values in sorted(buckets.items())]


def campaign_stats(*, campaign: Campaign, interval: str = "minute", since: datetime | None = None) -> dict:
    counts = campaign_counts(campaign=campaign)
    return {
        "campaign": {"id": campaign.id, "name": campaign.name, "status": campaign.status},
        "counts": counts,
        "rates": campaign_rates(counts),
        "providers": campaign_providers(campaign=campaign),
        "series": {"interval": interval, "points": campaign_series(campaign=campaign, interval=interval,
                                                                   since=since)},
    }


def campaigns_running(*, limit: int = 20) -> list[dict[str, Any]]:
    """Campaigns in flight (or paused) with their progress against the whole audience."""
    active = ("QUEUED", "SENDING", "PAUSED")
    campaigns = list(Campaign.objects.filter(status__in=active).order_by("-id")[:limit])
    by_campaign: dict[int, dict[str, int]] = defaultdict(dict)
    rows = (
        EmailMessage.objects.filter(campaign__in=campaigns)
        .values_list("campaign_id", "status")
        .annotate(n=Count("id"))
        .order_by()
    )
    for campaign_id, status, n in rows:
        by_campaign[campaign_id][status] = n
    result = []
    for c in campaigns:
        progress = campaign_progress(campaign=c, by_status=by_campaign[c.id])
        result.append({"id": c.id, "name": c.name, "status": c.status, "total": progress["audience"],
                       "done": progress["done"]})
    return result
