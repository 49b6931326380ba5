"""The daily facts writer (issue 30, decision 118): a closed UTC day's counts, written from the
message rows as one INSERT ... SELECT ... GROUP BY ... ON CONFLICT DO UPDATE.

What a day counts, per (service, template, campaign, stream, topic, key type):
- `sent`: messages whose `sent_at` falls on the day (the new `msg_sent_at_idx` finds them);
- `delivered` ... `unsubscribed`: messages whose *first* such event (feedback's MessageEventMark,
  the unique set behind the campaign counters) happened on the day. A mark's time is the time of
  one of its message's events, so the day's events (their (event_type, occurred_at) index) name
  every message that can have one: the marks are read for those messages only;
- `failed`, `suppressed`: messages in that status whose send was decided on the day: their last
  claim (the (status, claimed_at) index), or, never claimed (suppressed at the accept), their
  creation.
An event counts on the day it happened, not on its message's day: a message sent on D and opened
on D+1 is sent on D and opened on D+1, as the campaign series counts events by `occurred_at`.

The same SELECT answers a service's or a campaign's days straight from the rows (the reads of
days not written yet, and the test that facts and rows agree): `counted_sql`.

Rewriting a day: every tuple the rows give is upserted; a tuple of the day the rows no longer
give is deleted, unless its service or its campaign was deleted (their rows went with them: the
fact is all that is left) or its service's rows of that day may be gone (the horizon). A day is
rewritten under a transaction-level advisory lock, so two writers of one day take turns.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from analytics.horizon import day_start, metadata_horizon, rows_kept, utc_today
from analytics.models import COUNTERS, DIMENSIONS, DayFact, FactsDay
from campaigns.models import Campaign
from clients.models import Service
from delivery.models import EmailMessage
from feedback.models import EmailEvent, MessageEventMark
from feedback.normalize import EventType
from templates.models import TemplateVersion

logger = logging.getLogger(__name__)

MESSAGES = EmailMessage._meta.db_table
EVENTS = EmailEvent._meta.db_table
MARKS = MessageEventMark._meta.db_table
VERSIONS = TemplateVersion._meta.db_table
FACTS = DayFact._meta.db_table
SERVICES = Service._meta.db_table
CAMPAIGNS = Campaign._meta.db_table

# The counters a mark feeds (its event_type is the counter's name), and the events that leave a
# mark (feedback.services.marks): a mark's first_at is the occurred_at of one of these.
MARK_COUNTERS = ("delivered", "opened", "clicked", "bounced", "soft_bounced", "complained", "unsubscribed")
MARKED_EVENTS = [EventType.DELIVERED, EventType.OPENED, EventType.CLICKED, EventType.BOUNCED,
                 EventType.COMPLAINED, EventType.UNSUBSCRIBED, EventType.DROPPED]
_ENDED = [EmailMessage.Status.FAILED, EmailMessage.Status.SUPPRESSED]
# Two writers of one day take turns (pg_advisory_xact_lock(namespace, day)).
_LOCK_NAMESPACE = 118
# Each run also writes this many closed days that were never written (a fresh deployment fills
# its retention's days over its first runs), newest first.
BACKFILL_DAYS_PER_RUN = 7
# A closed day of the rewrite window is written again once this long has passed since its last
# write (each run writes today; a day that closed since its last write is written at once).
REWRITE_EVERY = timedelta(hours=1)


def _day(column: str) -> str:
    return f"(({column}) AT TIME ZONE 'UTC')::date"


_DIMS = "m.client_id, m.template_version_id, m.campaign_id, m.stream, m.topic_id, m.key_type"


def _counts(**counters: str) -> str:
    """Every counter in COUNTERS' order: the aggregate given, else 0."""
    return ", ".join(counters.get(name, "0") for name in COUNTERS)


def counted_sql(where: str) -> str:
    """SELECT service_id, day, template_id, campaign_id, stream, topic_id, key_type and the
    COUNTERS of the messages `where` picks (SQL over `m`), for the UTC days from %(lo)s up to
    %(hi)s (instants at midnight), one row per tuple and day with anything counted.

    Each kind is grouped where it is read (so each GROUP BY sees the message table's statistics
    and hashes a few hundred groups), and the few rows are grouped again by template. The first
    events are found from the range's events, their messages and marks by primary key and
    message id, in id order: the LATERAL subqueries' `OFFSET 0` keeps PostgreSQL from turning
    them into hash joins, which would read the whole message and mark tables (90 days of them)
    to find one day's (decision 118: 7 s instead of 20 s at a million a day on 4 days' rows)."""
    marks = {name: f"count(*) FILTER (WHERE mk.event_type = '{name}')" for name in MARK_COUNTERS}
    ended = {"failed": "count(*) FILTER (WHERE m.status = 'FAILED')",
             "suppressed": "count(*) FILTER (WHERE m.status = 'SUPPRESSED')"}
    sums = ", ".join(f"sum(a.{name})::int AS {name}" for name in COUNTERS)
    return (
        f"WITH touched AS MATERIALIZED (SELECT DISTINCT e.message_id AS id FROM {EVENTS} e "
        f"WHERE e.event_type = ANY(%(marked)s) AND e.occurred_at >= %(lo)s AND e.occurred_at < %(hi)s "
        f"AND e.message_id IS NOT NULL ORDER BY 1), "
        f"counted ({_DIMS.replace('m.', '')}, day, {', '.join(COUNTERS)}) AS ("
        f"SELECT {_DIMS}, {_day('m.sent_at')}, {_counts(sent='count(*)')} FROM {MESSAGES} m "
        f"WHERE m.sent_at >= %(lo)s AND m.sent_at < %(hi)s AND {where} GROUP BY {_DIMS}, 7 "
        f"UNION ALL "
        f"SELECT {_DIMS}, {_day('mk.first_at')}, {_counts(**marks)} FROM touched t "
        f"CROSS JOIN LATERAL (SELECT * FROM {MESSAGES} m WHERE m.id = t.id OFFSET 0) m "
        f"CROSS JOIN LATERAL (SELECT mk.event_type, mk.first_at FROM {MARKS} mk WHERE mk.message_id = t.id "
        f"AND mk.first_at >= %(lo)s AND mk.first_at < %(hi)s OFFSET 0) mk "
        f"WHERE {where} GROUP BY {_DIMS}, 7 "
        f"UNION ALL "
        f"SELECT {_DIMS}, {_day('m.claimed_at')}, {_counts(**ended)} FROM {MESSAGES} m "
        f"WHERE m.status = ANY(%(ended)s) AND m.claimed_at >= %(lo)s AND m.claimed_at < %(hi)s AND {where} "
        f"GROUP BY {_DIMS}, 7 "
        f"UNION ALL "
        f"SELECT {_DIMS}, {_day('m.created_at')}, {_counts(**ended)} FROM {MESSAGES} m "
        f"WHERE m.status = ANY(%(ended)s) AND m.claimed_at IS NULL "
        f"AND m.created_at >= %(lo)s AND m.created_at < %(hi)s AND {where} GROUP BY {_DIMS}, 7) "
        f"SELECT a.client_id AS service_id, a.day, tv.template_id, a.campaign_id, a.stream, a.topic_id, "
        f"a.key_type, {sums} "
        f"FROM counted a JOIN {VERSIONS} tv ON tv.id = a.template_version_id "
        f"GROUP BY a.client_id, a.day, tv.template_id, a.campaign_id, a.stream, a.topic_id, a.key_type"
    )


def counted_params(*, day_from: date, day_to: date, **extra: object) -> dict[str, object]:
    """The parameters of `counted_sql` for the UTC days day_from..day_to (both included)."""
    return {"lo": day_start(day_from), "hi": day_start(day_to + timedelta(days=1)),
            "marked": [str(t) for t in MARKED_EVENTS], "ended": [str(s) for s in _ENDED], **extra}


def _write_sql() -> str:
    columns = ", ".join([*DIMENSIONS, *COUNTERS, "written_at"])
    updates = ", ".join(f"{name} = EXCLUDED.{name}" for name in [*COUNTERS, "written_at"])
    writable = "m.client_id IS NOT NULL AND NOT (m.client_id = ANY(%(excluded)s))"
    return (
        f"WITH written AS (INSERT INTO {FACTS} ({columns}) "
        f"SELECT c.*, %(now)s FROM ({counted_sql(writable)}) c "
        f"ON CONFLICT ({', '.join(DIMENSIONS)}) DO UPDATE SET {updates} RETURNING id), "
        # The day's tuples the rows no longer give (a FAILED message sent again, a first event
        # found earlier), except those whose service or campaign is gone, or whose rows may be.
        f"gone AS (DELETE FROM {FACTS} f WHERE f.day = %(day)s "
        f"AND f.id NOT IN (SELECT id FROM written) "
        f"AND EXISTS (SELECT 1 FROM {SERVICES} s WHERE s.id = f.service_id) "
        f"AND NOT (f.service_id = ANY(%(excluded)s)) "
        f"AND (f.campaign_id IS NULL OR EXISTS (SELECT 1 FROM {CAMPAIGNS} c WHERE c.id = f.campaign_id)) "
        f"RETURNING 1) "
        f"SELECT (SELECT count(*) FROM written), (SELECT count(*) FROM gone)"
    )


@dataclass
class DayWrite:
    day: date
    rows: int = 0
    deleted: int = 0
    seconds: float = 0.0
    skipped_services: list[str] = field(default_factory=list)
    skipped: bool = False


def facts_write_day(day: date, *, now: datetime | None = None) -> DayWrite:
    """Write (or write again) the facts of a UTC day: a closed day, or today so far (the reads
    take today from these too, so none of them counts a day's rows). A service whose rows of
    that day may be gone (before its metadata horizon) is left as it is: its facts are all
    there is."""
    now = now or timezone.now()
    if day > utc_today(now):
        raise ValueError(f"{day} has not begun yet (days begin and close at midnight UTC)")
    services = list(Service.objects.all())
    excluded = sorted(s.pk for s in services if not rows_kept(s, day, now=now))
    result = DayWrite(day=day, skipped_services=excluded)
    if services and len(excluded) == len(services):
        result.skipped = True
        return result
    started = time.monotonic()
    params = counted_params(day_from=day, day_to=day, excluded=excluded, now=now, day=day)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_LOCK_NAMESPACE, day.toordinal()])
        # The day's distinct messages are hashed (touched, firsts): room for a million of them.
        cursor.execute("SET LOCAL work_mem = '64MB'")
        cursor.execute(_write_sql(), params)
        result.rows, result.deleted = cursor.fetchone()
        result.seconds = round(time.monotonic() - started, 3)
        FactsDay.objects.update_or_create(day=day, defaults={
            "written_at": now, "rows": result.rows, "seconds": result.seconds})
    logger.info("facts of %s written: %d rows, %d deleted, %.1f s", day, result.rows, result.deleted,
                result.seconds)
    return result


def facts_days_to_write(*, now: datetime | None = None) -> list[date]:
    """What one run (every 10 minutes) writes: today so far; each closed day of the rewrite
    window not written since it closed, or not for REWRITE_EVERY (late events land on their
    day); then up to BACKFILL_DAYS_PER_RUN older closed days never written, newest first, as far
    back as the longest-kept rows."""
    now = now or timezone.now()
    today = utc_today(now)
    window = [today - timedelta(days=n) for n in range(1, settings.NOTIFIER_FACTS_REWRITE_DAYS + 1)]
    horizons = [metadata_horizon(s, now=now) for s in Service.objects.all()] or [metadata_horizon(now=now)]
    oldest = min(horizons).astimezone(UTC).date() + timedelta(days=1)  # the first whole day kept
    backfill = [today - timedelta(days=n) for n in range(len(window) + 1, (today - oldest).days + 1)]
    written = dict(FactsDay.objects.filter(day__in=window + backfill).values_list("day", "written_at"))
    due = [day for day in window if day not in written or written[day] < day_start(day + timedelta(days=1))
           or written[day] <= now - REWRITE_EVERY]
    return [today, *due, *[day for day in backfill if day not in written][:BACKFILL_DAYS_PER_RUN]]


def facts_write_recent(*, now: datetime | None = None) -> list[DayWrite]:
    """The periodic run (analytics.write_facts, beat every 10 minutes): `facts_days_to_write`,
    each day in its own transaction."""
    now = now or timezone.now()
    return [facts_write_day(day, now=now) for day in facts_days_to_write(now=now)]
