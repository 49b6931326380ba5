"""The counts of the campaigns the dashboard shows as ended (decision 140).

An ended campaign stays on the dashboard for 24 h with its rows per status. Counting them is an
index scan of the campaign's rows (176-327 ms for five 100,000-row campaigns), and they barely
move after the end (a cancel's last rows, a settled AMBIGUOUS send), so the beat counts them
here and the dashboard reads the stored counts. Often just after the end, rarely later: a
campaign's counts are recounted once they are older than a quarter of the time since it ended,
at least a minute and at most an hour apart (about 40 counts over its 24 h).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from analytics.models import EndedCampaignCounts
from analytics.selectors.campaign_stats import campaign_status_counts, recently_ended
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
    if due:
        by_campaign = campaign_status_counts(due)
        fresh = [EndedCampaignCounts(campaign_id=campaign_id, by_status=by_campaign.get(campaign_id, {}),
                                     counted_at=now) for campaign_id in due]
        EndedCampaignCounts.objects.bulk_create(fresh, update_conflicts=True, unique_fields=["campaign_id"],
                                                update_fields=["by_status", "counted_at"])
    EndedCampaignCounts.objects.exclude(campaign_id__in=ended).delete()
    return len(due)


def _due(ended: dict[int, datetime], counted: dict[int, datetime], *, now: datetime) -> list[int]:
    """The campaigns of `ended` ({id: ended at}) whose counts (`counted`: {id: counted at}) are
    due: never counted first, then those counted longest ago."""
    due = [campaign_id for campaign_id, ended_at in ended.items()
           if campaign_id not in counted or counted[campaign_id] < now - recount_interval(now - ended_at)]
    return sorted(due, key=lambda campaign_id: (campaign_id in counted, counted.get(campaign_id, now)))
