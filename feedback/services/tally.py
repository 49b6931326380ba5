"""A campaign's events and first events per minute, provider and kind (decision 125).

The campaign statistics read their series and per-provider counts from this tally instead of
the campaign's events and marks (~725,000 events for a campaign of 250,000 messages: no join of
them answers in 200 ms). A processed batch adds what it stored, in its transaction, after the
counters: only events stored by this batch count, so a retry (which stores nothing) adds nothing.
One multi-row upsert per batch, its rows sorted by key: a fixed lock order across batches.

A campaign's tally is rebuilt from its rows (the migration's backfill, `recount_campaign`)
under an exclusive per-campaign advisory lock; every batch takes the shared one for each
campaign it counts before writing counters or tally. A batch is therefore either committed
before a rebuild reads the rows, or adds its increments after the rebuild commits: never both.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db import connection, transaction

from core.live_counts import minute_of
from delivery.models import EmailMessage
from feedback.models import CampaignEventMinute, EmailEvent, MessageEventMark
from feedback.services.events import StoredEvent
from feedback.services.upserts import rows_add

TALLY_TABLE = CampaignEventMinute._meta.db_table
KEY = ("campaign_id", "minute", "provider", "kind")
# (campaign id, minute, provider, kind) -> [events, firsts]
TallyKey = tuple[int, datetime, str, str]
Tally = dict[TallyKey, list[int]]
# pg_advisory_xact_lock(namespace, campaign id): the counts of one campaign (campaign ids fit
# an int4, as the fan-out's lock, 7301, already assumes).
COUNTS_LOCK_NAMESPACE = 7302


def campaign_tally_of_batch(*, stored: Iterable[StoredEvent], new_marks: Iterable[tuple[int, str]],
                            marks: dict[tuple[int, str], datetime]) -> Tally:
    """What a batch adds: each stored event of a campaign's message at its minute, each new mark
    at the minute of its time in this batch (`marks`, as `marks_record` wrote it)."""
    tally: Tally = {}
    refs = {}
    for item in stored:
        ref = item.message
        if ref is None or ref.campaign_id is None:
            continue
        refs[ref.id] = ref
        event = item.event
        key = (ref.campaign_id, minute_of(event.occurred_at), ref.provider or "", event.event_type.value)
        tally.setdefault(key, [0, 0])[0] += 1
    for message_id, name in new_marks:
        ref = refs.get(message_id)
        if ref is not None:
            key = (ref.campaign_id, minute_of(marks[(message_id, name)]), ref.provider or "", name)
            tally.setdefault(key, [0, 0])[1] += 1
    return tally


def campaign_counts_share(campaign_ids: Iterable[int]) -> None:
    """Hold each campaign's counts lock shared until commit (no rebuild of them runs meanwhile);
    a batch takes it before it writes the campaign's counters and tally."""
    ids = sorted(set(campaign_ids))
    if ids:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock_shared(%s, c) FROM unnest(%s::int[]) AS c",
                           [COUNTS_LOCK_NAMESPACE, ids])


def campaign_counts_lock(campaign_id: int) -> None:
    """Hold one campaign's counts lock exclusively until commit: the batches counting it wait,
    those that counted it have committed (a rebuild reads them all)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [COUNTS_LOCK_NAMESPACE, campaign_id])


def campaign_tally_increment(tally: Tally) -> int:
    """Add a batch's tally (campaign_tally_of_batch); returns how many rows it touched."""
    return rows_add(TALLY_TABLE, key=KEY, added=("events", "firsts"),
                    rows=[(*key, *tally[key]) for key in sorted(tally)])


# One campaign's tally from its rows. Its messages come from the campaign index, sorted by id,
# and drive one probe per message of the (message_id, event_type) index of events and of marks:
# the LATERAL fenced with OFFSET 0 keeps PostgreSQL from hash-joining them with every event and
# mark of the retention instead (decision 118's shape).
_COMPUTED = (
    f"SELECT m.campaign_id, date_trunc('minute', x.at, 'UTC') AS minute, m.provider, x.kind, "
    f"sum(x.events)::int, sum(x.firsts)::int "
    f"FROM (SELECT id, campaign_id, provider FROM {EmailMessage._meta.db_table} "
    f"      WHERE campaign_id = %s ORDER BY id OFFSET 0) AS m "
    f"CROSS JOIN LATERAL ("
    f"  SELECT e.occurred_at AS at, e.event_type AS kind, 1 AS events, 0 AS firsts "
    f"  FROM {EmailEvent._meta.db_table} e WHERE e.message_id = m.id "
    f"  UNION ALL "
    f"  SELECT k.first_at, k.event_type, 0, 1 FROM {MessageEventMark._meta.db_table} k "
    f"  WHERE k.message_id = m.id OFFSET 0) AS x "
    f"GROUP BY m.campaign_id, 2, m.provider, x.kind"
)


def campaign_tally_compute(campaign_id: int) -> Tally:
    """One campaign's tally as its stored events and marks say it should be (nothing written)."""
    with connection.cursor() as cursor:
        cursor.execute(_COMPUTED, [campaign_id])
        return {(c, minute, provider, kind): [events, firsts]
                for c, minute, provider, kind, events, firsts in cursor.fetchall()}


def campaign_tally_refill(campaign_id: int) -> int:
    """Replace one campaign's tally with the computed one; the caller holds its counts lock in
    the same transaction. Returns the rows written."""
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {TALLY_TABLE} WHERE campaign_id = %s", [campaign_id])
        cursor.execute(f"INSERT INTO {TALLY_TABLE} ({', '.join(KEY)}, events, firsts) {_COMPUTED}",
                       [campaign_id])
        return cursor.rowcount


def campaign_tally_rebuild(campaign_id: int) -> int:
    """Rebuild one campaign's tally from its rows in one transaction (the backfill's step)."""
    with transaction.atomic():
        campaign_counts_lock(campaign_id)
        return campaign_tally_refill(campaign_id)


def campaign_ids_with_messages() -> list[int]:
    """Every campaign id its messages name, by a skip scan of the campaign index (one probe per
    campaign), not a scan of the messages: the campaigns whose events can be tallied."""
    table = EmailMessage._meta.db_table
    sql = (
        f"WITH RECURSIVE c(id) AS ("
        f"  SELECT min(campaign_id) FROM {table} "
        f"  UNION ALL "
        f"  SELECT (SELECT min(campaign_id) FROM {table} WHERE campaign_id > c.id) "
        f"  FROM c WHERE c.id IS NOT NULL"
        f") SELECT id FROM c WHERE id IS NOT NULL"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return [row[0] for row in cursor.fetchall()]


def campaign_tally_forget(sender: object, instance: object, **kwargs: object) -> None:
    """post_delete receiver for a campaign (connected by campaigns): its tally goes with it, as
    its counter row does."""
    CampaignEventMinute.objects.filter(campaign_id=instance.pk).delete()
