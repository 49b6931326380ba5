"""Reads on campaigns: per-status counts and progress."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Count
from django.utils import timezone

from audience.models import Stream, Topic
from campaigns.campaign_schedule import campaign_last_due
from campaigns.models import Campaign
from delivery.models import EmailMessage

MS = EmailMessage.Status
# Statuses a message reaches only after it was sent: all count as "sent" too.
_AFTER_SENT = [MS.SENT, MS.DELIVERED, MS.OPENED, MS.CLICKED, MS.BOUNCED, MS.COMPLAINED]
# A message in one of these will not be sent again: it counts towards a campaign's progress.
# CANCELLED is left out on purpose: a cancelled recipient was never reached.
_DONE = [*_AFTER_SENT, MS.FAILED, MS.SUPPRESSED, MS.AMBIGUOUS]


def campaign_status_counts(*, campaign_id: int) -> dict[str, int]:
    """Rows per status: one GROUP BY over the (campaign, status) index, no counter hot row."""
    rows = (
        EmailMessage.objects.filter(campaign_id=campaign_id)
        .values_list("status")
        .annotate(n=Count("id"))
        .order_by()
    )
    return {status: n for status, n in rows}


def campaign_progress(*, campaign: Campaign, by_status: dict[str, int]) -> dict[str, int]:
    """{audience, done}: the one progress figure every view shows (API, stats, dashboard, demo).

    `audience` is the whole audience, not the rows written so far: the size the fan-out counted
    (exact once it finished), or the rows written plus excluded if it is larger (the audience
    grew meanwhile) or not known yet (the fan-out has not started). `done` counts recipients
    that will not be sent again, excluded ones included; cancelled ones are not done.
    """
    written = sum(by_status.values()) + campaign.excluded_count
    done = sum(by_status.get(status, 0) for status in _DONE) + campaign.excluded_count
    return {"audience": max(campaign.audience_size or 0, written), "done": done}


def campaign_counters(*, campaign: Campaign, by_status: dict[str, int] | None = None) -> dict[str, int]:
    """Live counters. `total` is the whole audience (campaign_progress); `suppressed` includes
    contacts excluded at fan-out (never written). `by_status`: its rows per status, when the
    caller counted several campaigns at once (campaign_status_counts otherwise)."""
    if by_status is None:
        by_status = campaign_status_counts(campaign_id=campaign.pk)
    progress = campaign_progress(campaign=campaign, by_status=by_status)
    get = by_status.get
    return {
        "total": progress["audience"],
        "done": progress["done"],
        "scheduled": get(MS.SCHEDULED, 0),
        "queued": get(MS.QUEUED, 0),
        "sending": get(MS.SENDING, 0),
        "sent": sum(get(s, 0) for s in _AFTER_SENT),
        "delivered": sum(get(s, 0) for s in (MS.DELIVERED, MS.OPENED, MS.CLICKED)),
        "opened": sum(get(s, 0) for s in (MS.OPENED, MS.CLICKED)),
        "clicked": get(MS.CLICKED, 0),
        "bounced": get(MS.BOUNCED, 0),
        "complained": get(MS.COMPLAINED, 0),
        "failed": get(MS.FAILED, 0),
        "ambiguous": get(MS.AMBIGUOUS, 0),
        "suppressed": get(MS.SUPPRESSED, 0) + campaign.excluded_count,
        "cancelled": get(MS.CANCELLED, 0),
    }


def campaign_topic(campaign_id: int) -> Topic | None:
    """The campaign's topic (None: it has none, or the campaign is gone): what its one-click link
    leaves. Registered with consent (consent/extensions.py) in campaigns/apps.py."""
    campaign = Campaign.objects.filter(pk=campaign_id).select_related("topic").first()
    return campaign.topic if campaign is not None else None


# A campaign in one of these may still have rows waiting for their time.
_MAY_WAIT = [Campaign.Status.DRAFT, Campaign.Status.SCHEDULED, Campaign.Status.QUEUED,
             Campaign.Status.SENDING, Campaign.Status.PAUSED]


def campaigns_pending_until(service_id: str, stream: str) -> datetime | None:
    """The latest due time of the service's scheduled campaigns still open (their rows are
    broadcast); registered as a pending horizon for retention (clients/retention.py)."""
    if stream != Stream.BROADCAST:
        return None
    now = timezone.now()
    schedules = Campaign.objects.filter(client_id=service_id, status__in=_MAY_WAIT).values_list(
        "schedule", flat=True)
    found = [when for schedule in schedules if (when := campaign_last_due(schedule, now=now)) and when > now]
    return max(found, default=None)
