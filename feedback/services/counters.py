"""Campaign counters, incremented once per processed batch (never one hot-row UPDATE per event).

Input is the set of *new* marks of the batch (first open of a message, ...), so the counters are
unique per message by construction. One upsert per batch covers every campaign it touched,
in campaign-id order (a fixed lock order across concurrent batches). A recount rebuilds a
campaign's counters and its minute tally (feedback/services/tally.py) together, under the
campaign's counts lock, which a batch holds shared while it counts the campaign.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from django.db import connection, transaction

from delivery.models import EmailMessage
from feedback.models import CampaignEventCounter, MessageEventMark
from feedback.services.tally import campaign_counts_lock, campaign_tally_refill
from feedback.services.upserts import rows_add

COUNTER_TABLE = CampaignEventCounter._meta.db_table
COUNTED = ("delivered", "opened", "clicked", "bounced", "soft_bounced", "complained", "unsubscribed")


def campaign_counters_increment(*, new_marks: Iterable[tuple[int, str]]) -> int:
    """`new_marks` are (campaign id, mark name); returns how many campaigns were touched."""
    tally: dict[int, Counter[str]] = {}
    for campaign_id, name in new_marks:
        if name in COUNTED:
            tally.setdefault(campaign_id, Counter())[name] += 1
    return rows_add(COUNTER_TABLE, key=("campaign_id",), added=COUNTED, stamp="updated_at",
                    rows=[(c, *(tally[c][name] for name in COUNTED)) for c in sorted(tally)])


def campaign_counters_compute(*, campaign_id: int) -> dict[str, int]:
    """One campaign's counters as the unique event marks say they should be: its messages from
    the campaign index drive one probe each of the marks' (message_id, event_type) index (the
    fenced LATERAL, as the tally's rebuild: a join would hash every mark of the retention,
    ~50M rows at a month of 1M a day)."""
    marks = MessageEventMark._meta.db_table
    messages = EmailMessage._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT k.event_type, COUNT(*) FROM (SELECT id FROM {messages} WHERE campaign_id = %s "
            f"ORDER BY id OFFSET 0) AS m CROSS JOIN LATERAL (SELECT event_type FROM {marks} k "
            f"WHERE k.message_id = m.id OFFSET 0) AS k GROUP BY k.event_type",
            [campaign_id],
        )
        found = dict(cursor.fetchall())
    return {name: int(found.get(name, 0)) for name in COUNTED}


def campaign_counters_recount(*, campaign_id: int) -> dict[str, int]:
    """Replace the stored counters and minute tally with the computed ones (repair after a bug,
    a manual fix or the tally's backfill race), in one transaction that holds the campaign's
    counts lock: batches processed meanwhile are counted once, before or after it."""
    with transaction.atomic():
        campaign_counts_lock(campaign_id)
        counts = campaign_counters_compute(campaign_id=campaign_id)
        CampaignEventCounter.objects.update_or_create(campaign_id=campaign_id, defaults=counts)
        campaign_tally_refill(campaign_id)
    return counts
