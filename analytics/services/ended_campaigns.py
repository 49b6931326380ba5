"""The counts of the campaigns the dashboard shows as ended (decision 140).

An ended campaign stays on the dashboard for 24 h with its rows per status. Counting them is an
index scan of the campaign's rows (176-327 ms for five 100,000-row campaigns), and they barely
move after the end (a cancel's last rows, a settled AMBIGUOUS send), so the beat counts them
here and the dashboard reads the stored counts. Often just after the end, rarely later: a
campaign's counts are recounted once they are older than a quarter of the time since it ended,
at least a minute and at most an hour apart (about 40 counts over its 24 h).

The statistics API reads the same row for an ended campaign (decision 141): grouping a
250,000-row campaign's messages by status, provider and minute sent is 113-175 ms of a month of
history, though a settled campaign's figures no longer move. It counts them when the stored ones
are due by the same rule (so at most once an hour for an old campaign), and stores them when the
campaign is settled; the beat forgets the counts of campaigns not shown an hour after their count.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from analytics.models import EndedCampaignCounts
from analytics.selectors.campaign_stats import (
    ENDED,
    RowCounts,
    campaign_row_counts,
    campaign_rows_may_be_gone,
    recently_ended,
)
from campaigns.models import Campaign

RECOUNT_MIN = timedelta(minutes=1)
RECOUNT_MAX = timedelta(hours=1)
# Campaigns counted per run at most, those counted longest ago first: a burst of campaigns
# ending together is caught up over the next minutes, never in one long run.
RECOUNT_LIMIT = 50


def recount_interval(since_end: timedelta) -> timedelta:
    """How old a campaign's counts may be, `since_end` after it ended."""
    return min(max(since_end / 4, RECOUNT_MIN), RECOUNT_MAX)


def ended_campaign_counts_refresh(*, now: datetime | None = None, limit: int = RECOUNT_LIMIT) -> int:
    """Count the shown ended campaigns whose counts are due, store them, and forget the counts of
    campaigns no longer shown; returns how many campaigns were counted."""
    now = now or timezone.now()
    ended = dict(recently_ended(Campaign.objects.all(), now=now).values_list("id", "completed_at"))
    stored = EndedCampaignCounts.objects.filter(campaign_id__in=ended)
    due = _due(ended, dict(stored.values_list("campaign_id", "counted_at")), now=now)[:limit]
    for campaign in Campaign.objects.filter(id__in=due):
        _store(campaign.pk, campaign_row_counts(campaign=campaign, now=now))
    # Not shown: kept while the stats may read them (until due), forgotten after.
    unshown = EndedCampaignCounts.objects.exclude(campaign_id__in=ended)
    unshown.filter(counted_at__lt=now - RECOUNT_MAX).delete()
    return len(due)


def ended_campaign_row_counts(*, campaign: Campaign, now: datetime | None = None) -> RowCounts:
    """The campaign's rows as its statistics read them: an ended campaign's stored counts while
    they are not due, else counted (and stored once it is settled). A campaign still sending, or
    one whose rows may be gone (the counts must follow the expiry), is always counted."""
    now = now or timezone.now()
    keepable = (campaign.status in ENDED and campaign.completed_at is not None
                and not campaign_rows_may_be_gone(campaign, now=now))
    if not keepable:
        return campaign_row_counts(campaign=campaign, now=now)
    stored = EndedCampaignCounts.objects.filter(campaign_id=campaign.pk, sent_by_minute__isnull=False).first()
    if stored is not None and not _is_due(stored.counted_at, campaign.completed_at, now=now):
        kept = RowCounts.from_stored(stored)
        if kept.settled:
            return kept
    counted = campaign_row_counts(campaign=campaign, now=now)
    if counted.settled:
        _store(campaign.pk, counted)
    return counted


def _store(campaign_id: int, counts: RowCounts) -> None:
    """Insert or replace the campaign's counts in one statement (two requests may race to it)."""
    fields = counts.stored_fields()
    EndedCampaignCounts.objects.bulk_create([EndedCampaignCounts(campaign_id=campaign_id, **fields)],
                                            update_conflicts=True, unique_fields=["campaign_id"],
                                            update_fields=list(fields))


def _is_due(counted_at: datetime, ended_at: datetime, *, now: datetime) -> bool:
    return counted_at < now - recount_interval(now - ended_at)


def _due(ended: dict[int, datetime], counted: dict[int, datetime], *, now: datetime) -> list[int]:
    """The campaigns of `ended` ({id: ended at}) whose counts (`counted`: {id: counted at}) are
    due: never counted first, then those counted longest ago."""
    due = [campaign_id for campaign_id, ended_at in ended.items()
           if campaign_id not in counted or _is_due(counted[campaign_id], ended_at, now=now)]
    return sorted(due, key=lambda campaign_id: (campaign_id in counted, counted.get(campaign_id, now)))
