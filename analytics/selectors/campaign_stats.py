"""Campaign analytics: counts, rates, per provider and a time series (reads only)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.core.cache import cache
from django.db.models import Count, DateTimeField, F, Func, QuerySet, Sum
from django.utils import timezone

from analytics.horizon import day_start, metadata_horizon, utc_today
from analytics.models import EndedCampaignCounts
from analytics.selectors.days import MAX_DAYS, campaign_days, campaign_lifetime_counts
from audience.models import ConsentChange
from campaigns.models import Campaign
from campaigns.selectors import campaign_counters, campaign_progress
from clients.key_types import KeyType
from core.db_lookups import planner_settings
from core.live_counts import minute_of
from delivery.models import EmailMessage
from feedback.models import CampaignEventCounter, CampaignEventMinute


def _its_minute(minute: datetime) -> datetime:
    return minute


def _its_hour(minute: datetime) -> datetime:
    return minute.replace(minute=0)


# A series' bucket of a UTC minute (the events' come from the minute tally, decision 125, so a
# series counts whole minutes: `since` from the start of its minute).
INTERVALS = {"minute": _its_minute, "hour": _its_hour}
# "day" comes from the daily facts (closed days) and the rows (the others): analytics.selectors.days.
SERIES_INTERVALS = [*INTERVALS, "day"]
COUNTED = ("delivered", "opened", "clicked", "bounced", "soft_bounced", "complained", "unsubscribed")


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 6) if whole else 0.0


def campaign_rows_may_be_gone(campaign: Campaign, *, now: datetime | None = None) -> bool:
    """The campaign began before its service's metadata horizon: some of its rows may be gone."""
    return campaign.created_at < metadata_horizon(campaign.client, now=now)


# Rows whose status will still change without anyone asking: a campaign with none is settled.
IN_FLIGHT = ("QUEUED", "SCHEDULED", "SENDING", "AMBIGUOUS")


@dataclass
class RowCounts:
    """A campaign's messages from one grouped read (by status, provider and the UTC minute of
    `sent_at`), as of `counted_at`: its counts by status, `sent`, the providers' `sent` and the
    series' sends."""

    counted_at: datetime
    by_status: dict[str, int] = field(default_factory=dict)
    sent_by_provider: dict[str, int] = field(default_factory=dict)
    sent_by_minute: dict[datetime, int] = field(default_factory=dict)

    @property
    def sent(self) -> int:
        return sum(self.sent_by_provider.values())

    @property
    def settled(self) -> bool:
        """No row is still on its way: what the statistics read of them no longer moves (a
        delivery or an open moves a SENT row to another sent status, never out of `sent`)."""
        return not any(self.by_status.get(status) for status in IN_FLIGHT)

    @classmethod
    def from_stored(cls, stored: EndedCampaignCounts) -> RowCounts:
        minutes = {datetime.fromisoformat(at): n for at, n in (stored.sent_by_minute or {}).items()}
        return cls(by_status=stored.by_status, sent_by_provider=stored.sent_by_provider or {},
                   sent_by_minute=minutes, counted_at=stored.counted_at)

    def stored_fields(self) -> dict[str, Any]:
        """EndedCampaignCounts' fields for these counts."""
        return {"by_status": self.by_status, "sent_by_provider": self.sent_by_provider,
                "sent_by_minute": {at.isoformat(): n for at, n in self.sent_by_minute.items()},
                "counted_at": self.counted_at}


# A campaign's rows were written together by its fan-out, so they fill few pages of its week's
# partition: the (campaign, status) index and a bitmap of those pages read them. The planner
# cannot know it (a bitmap scan's estimate spreads the rows over the whole table) and, for a
# campaign of 5% of its week, scans the whole partition in parallel: 317 ms against 116 ms for a
# history campaign of 166,666 rows among 3.3M (issue 30, docs/benchmarks.md). Once its week is
# vacuumed (all visible), the planner's own choice is the index-only scan of
# msg_campaign_cover_idx, which reads no heap (decision 134); bitmap scans stay allowed for the
# pages not yet vacuumed: an index-only scan there fetches every row's heap tuple in index order.
CAMPAIGN_ROWS_PLAN = {"enable_seqscan": "OFF", "max_parallel_workers_per_gather": "0", "jit": "OFF"}


class UtcMinute(Func):
    """A timestamp's UTC minute, as an aware datetime: date_bin of its instant in whole minutes
    from the epoch (every UTC minute starts one). TruncMinute(tzinfo=UTC) gives the same minute
    through date_trunc of its UTC wall time, a conversion to it and back per row: 20% of the
    grouped read of a 250,000-message campaign (decision 129)."""

    template = "date_bin('1 minute', %(expressions)s, TIMESTAMPTZ '1970-01-01 00:00:00+00')"
    output_field = DateTimeField()


def campaign_row_counts(*, campaign: Campaign, now: datetime | None = None) -> RowCounts:
    """The one read of the campaign's messages the statistics make, from the campaign index
    alone once its week is vacuumed: msg_campaign_cover_idx includes `provider` and `sent_at`.
    `now`: the count's time (the due rule of kept counts compares it with its own `now`)."""
    grouped = (EmailMessage.objects.filter(campaign=campaign)
               .annotate(t=UtcMinute("sent_at")).values_list("status", "provider", "t")
               .annotate(n=Count("id")).order_by())
    counts = RowCounts(counted_at=now or timezone.now())
    with planner_settings(CAMPAIGN_ROWS_PLAN):
        found = list(grouped)
    for status, provider, minute, n in found:
        counts.by_status[status] = counts.by_status.get(status, 0) + n
        if minute is not None:
            counts.sent_by_provider[provider] = counts.sent_by_provider.get(provider, 0) + n
            counts.sent_by_minute[minute] = counts.sent_by_minute.get(minute, 0) + n
    return counts


def campaign_counts(*, campaign: Campaign, rows: RowCounts | None = None,
                    rows_may_be_gone: bool | None = None) -> dict[str, int]:
    rows = rows if rows is not None else campaign_row_counts(campaign=campaign)
    if rows_may_be_gone is None:
        rows_may_be_gone = campaign_rows_may_be_gone(campaign)
    by_status = rows.by_status
    counter = CampaignEventCounter.objects.filter(campaign=campaign).first()
    counts = {name: getattr(counter, name, 0) for name in COUNTED}
    counts["messages"] = sum(by_status.values())
    # Progress against the whole audience, as on the dashboard and in the campaign API.
    counts.update(campaign_progress(campaign=campaign, by_status=by_status))
    counts["sent"] = rows.sent
    counts["pending"] = sum(by_status.get(s, 0) for s in ("QUEUED", "SCHEDULED", "SENDING"))
    counts["failed"] = by_status.get("FAILED", 0)
    counts["suppressed"] = by_status.get("SUPPRESSED", 0)
    if rows_may_be_gone:
        # Sent, failed and suppressed over its whole life from the daily facts (the event counts
        # come from its counter row, kept with the campaign).
        counts.update(campaign_lifetime_counts(campaign=campaign))
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


def campaign_providers(*, campaign: Campaign, rows: RowCounts | None = None) -> dict[str, dict[str, int]]:
    """Per provider (the message's; "unknown" when it has none): its sent messages and, per
    kind, the messages with such an event (first events, from the minute tally)."""
    rows = rows if rows is not None else campaign_row_counts(campaign=campaign)
    sent = rows.sent_by_provider
    providers: dict[str, dict[str, int]] = {p or "unknown": {"sent": n} for p, n in sent.items()}
    firsts = (
        CampaignEventMinute.objects.filter(campaign_id=campaign.pk)
        .values_list("provider", "kind").annotate(n=Sum("firsts")).filter(n__gt=0).order_by()
    )
    for provider, kind, n in firsts:
        providers.setdefault(provider or "unknown", {"sent": 0})[kind] = n
    return providers


def campaign_series(*, campaign: Campaign, interval: str, since: datetime | None,
                    rows: RowCounts | None = None) -> list[dict[str, Any]]:
    """Per UTC minute or hour: messages sent and every event the ESPs reported (by kind), from
    the minute of `since` on (whole minutes: the events come from the minute tally)."""
    if interval == "day":
        return campaign_day_series(campaign=campaign, since=since)
    bucket = INTERVALS[interval]
    start = minute_of(since) if since is not None else None
    rows = rows if rows is not None else campaign_row_counts(campaign=campaign)
    buckets: dict[datetime, dict[str, int]] = {}
    for minute, n in rows.sent_by_minute.items():
        if start is None or minute >= start:
            point = buckets.setdefault(bucket(minute), {})
            point["sent"] = point.get("sent", 0) + n
    tally = CampaignEventMinute.objects.filter(campaign_id=campaign.pk)
    if start is not None:
        tally = tally.filter(minute__gte=start)
    events = tally.values_list("minute", "kind").annotate(n=Sum("events")).filter(n__gt=0).order_by()
    for minute, kind, n in events:
        point = buckets.setdefault(bucket(minute), {})
        point[kind] = point.get(kind, 0) + n
    return [{"t": at.isoformat(), **values} for at, values in sorted(buckets.items())]


def campaign_day_series(*, campaign: Campaign, since: datetime | None) -> list[dict[str, Any]]:
    """Per UTC day from `since`'s day (default: the campaign's creation) to today: each message
    once per kind, on the day of its first such event (as `counts`), from the facts and rows."""
    today = utc_today()
    first = min((since or campaign.created_at).astimezone(UTC).date(), today)
    answer = campaign_days(campaign=campaign, day_from=max(first, today - timedelta(days=MAX_DAYS - 1)),
                           day_to=today)
    return [{"t": day_start(date.fromisoformat(p["date"])).isoformat(),
             **{k: v for k, v in p.items() if k != "date"}} for p in answer["points"]]


def campaign_unsubscribes_by_topic(*, campaign: Campaign) -> list[dict[str, Any]]:
    """How many recipients this campaign's mail made leave each topic (`topic` None: the whole
    broadcast stream), by its one-click link or an ESP's unsubscribe event: one GROUP BY over
    the history's (campaign_id, topic) index. Exact however often a link is clicked: the history
    records only changes (audience.services.consent), so a repeat counts nothing."""
    rows = (ConsentChange.objects.filter(campaign_id=campaign.pk, subscribed=False)
            .values_list("topic_id", "topic__name").annotate(n=Count("id"))
            .order_by(F("topic_id").asc(nulls_first=True)))
    return [{"topic": {"id": topic_id, "name": name} if topic_id is not None else None, "unsubscribed": n}
            for topic_id, name, n in rows]


def campaign_stats(*, campaign: Campaign, interval: str = "minute", since: datetime | None = None,
                   rows: RowCounts | None = None) -> dict:
    """Counts, rates, providers and the series. The campaign's messages are read once (grouped
    by status, provider and minute sent), or not at all when the caller has their counts (an
    ended campaign's stored ones, decision 141); its events and marks never: their figures come
    from its counter row and minute tally (decision 125)."""
    rows = rows if rows is not None else campaign_row_counts(campaign=campaign)
    gone = campaign_rows_may_be_gone(campaign)  # once: the service's horizon, the counts' source
    counts = campaign_counts(campaign=campaign, rows=rows, rows_may_be_gone=gone)
    return {
        "campaign": {"id": campaign.id, "name": campaign.name, "status": campaign.status},
        "counts": counts,
        "counts_source": "facts" if gone else "rows",
        "rows_counted_at": rows.counted_at.isoformat(),
        "rates": campaign_rates(counts),
        "providers": campaign_providers(campaign=campaign, rows=rows),
        "unsubscribes_by_topic": campaign_unsubscribes_by_topic(campaign=campaign),
        "series": {"interval": interval, "points": campaign_series(campaign=campaign, interval=interval,
                                                                   since=since, rows=rows)},
    }


def campaigns_current(*, now: datetime, limit: int = 20) -> list[dict[str, Any]]:
    """Campaigns in flight (or paused), newest first, then those that ended in the last 24 h,
    last ended first, each with its progress against the whole audience and its counts (final
    ones for an ended campaign): a campaign stays on the dashboard after it completes."""
    live = Campaign.objects.exclude(key_type=KeyType.TEST)  # the dashboard's live figures (issue 27)
    active = list(live.filter(status__in=ACTIVE).order_by("-id")[:limit])
    ended = list(recently_ended(Campaign.objects.all(), now=now).order_by("-completed_at")[:limit])
    by_campaign = campaign_status_counts([c.id for c in active])
    by_campaign.update(_ended_status_counts([c.id for c in ended]))
    return [_campaign_row(c, by_campaign.get(c.id, {})) for c in active + ended]


ACTIVE = ("QUEUED", "SENDING", "PAUSED")
ENDED = ("COMPLETED", "CANCELLED", "FAILED")
RECENTLY_ENDED = timedelta(hours=24)
# An ended campaign's counts barely move (a late bounce, a settled AMBIGUOUS send), while
# counting a million-row campaign is a ~0.1 s index scan: the beat stores them
# (analytics.services.ended_campaigns); until its first count, a web process counts them once a
# minute, not on every 2 s poll of every open dashboard.
ENDED_COUNTS_SECONDS = 60


def recently_ended(campaigns: QuerySet[Campaign], *, now: datetime) -> QuerySet[Campaign]:
    """The dashboard's ended campaigns among `campaigns`: those that ended in the last 24 h, and
    the only live ones the dashboard counts (so not a test key's, issue 27)."""
    return campaigns.exclude(key_type=KeyType.TEST).filter(status__in=ENDED,
                                                           completed_at__gte=now - RECENTLY_ENDED)


def campaign_status_counts(campaign_ids: list[int]) -> dict[int, dict[str, int]]:
    """{campaign id: {status: rows}}: one GROUP BY over the (campaign, status) index."""
    by_campaign: dict[int, dict[str, int]] = defaultdict(dict)
    rows = (
        EmailMessage.objects.filter(campaign_id__in=campaign_ids)
        .values_list("campaign_id", "status")
        .annotate(n=Count("id"))
        .order_by()
    )
    for campaign_id, status, n in rows:
        by_campaign[campaign_id][status] = n
    return dict(by_campaign)


def _ended_status_counts(campaign_ids: list[int]) -> dict[int, dict[str, int]]:
    """The beat's stored counts; a campaign it has not counted yet from the cache or a count."""
    found = dict(EndedCampaignCounts.objects.filter(campaign_id__in=campaign_ids)
                 .values_list("campaign_id", "by_status"))
    keys = {campaign_id: f"dashboard:ended-campaign-counts:{campaign_id}"
            for campaign_id in campaign_ids if campaign_id not in found}
    cached = cache.get_many(list(keys.values())) if keys else {}
    found.update({campaign_id: cached[key] for campaign_id, key in keys.items() if key in cached})
    missing = [campaign_id for campaign_id in campaign_ids if campaign_id not in found]
    if missing:
        counted = campaign_status_counts(missing)
        fresh = {campaign_id: counted.get(campaign_id, {}) for campaign_id in missing}
        cache.set_many({keys[c]: counts for c, counts in fresh.items()}, ENDED_COUNTS_SECONDS)
        found.update(fresh)
    return found


def _campaign_row(campaign: Campaign, by_status: dict[str, int]) -> dict[str, Any]:
    counters = campaign_counters(campaign=campaign, by_status=by_status)
    ended = campaign.status in ENDED and campaign.completed_at is not None
    return {"id": campaign.id, "name": campaign.name, "status": campaign.status,
            "total": counters["total"], "done": counters["done"],
            "ended_at": campaign.completed_at.isoformat() if ended else None,
            "counts": {name: counters[name] for name in ("sent", "failed", "suppressed", "cancelled")}}
