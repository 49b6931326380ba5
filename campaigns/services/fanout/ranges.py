"""How a fan-out cuts the audience: disjoint contact-id ranges written at once, one connection
each (a big audience, decision 58), and the windows of contact ids a re-publish walks past the
publish marks (campaigns/services/fanout_marks.py)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import connection

from campaigns.audience import CONTACT_TABLE
from campaigns.models import Campaign
from campaigns.services.fanout_marks import range_field

NO_UPPER = 2**63 - 1  # the last range is open: contacts added during the fan-out are reached


@dataclass
class Range:
    """Contacts with cursor < id <= upper; `index` is its place in `fanout_ranges` (None: the
    single-connection fan-out, whose cursor is `fanout_cursor`)."""

    index: int | None
    cursor: int
    upper: int


def ranges_record(campaign: Campaign) -> list[list[int]]:
    """Split a big audience into equal contact-id ranges, one per connection; [] for one.

    By id, not by count: the split costs two index probes, and a range that happens to hold
    more of the audience only finishes later (the others are done and idle by then).
    """
    connections = settings.NOTIFIER_FANOUT_CONNECTIONS
    if connections < 2 or (campaign.audience_size or 0) < settings.NOTIFIER_FANOUT_PARALLEL_MIN:
        return []
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT min(id), max(id) FROM {CONTACT_TABLE}")
        low, high = cursor.fetchone()
    if low is None:
        return []
    span = high - low + 1
    bounds = [low - 1 + span * k // connections for k in range(connections)] + [NO_UPPER]
    ranges = [[bounds[k], bounds[k + 1]] for k in range(connections)]
    Campaign.objects.filter(pk=campaign.id, fanout_cursor=0).update(fanout_ranges=ranges)
    return ranges


def unpublished_windows(campaign: Campaign, published: dict[str, int]) -> list[tuple[int, int]]:
    """(after, upper] contact ids per range whose rows may be unpublished. A range's lower bound
    is the upper bound of the one before it (its own first element is its moving cursor)."""
    if not campaign.fanout_ranges:
        return [(published.get(range_field(None), 0), NO_UPPER)]
    windows, lower = [], 0
    for index, (_cursor, upper) in enumerate(campaign.fanout_ranges):
        windows.append((max(lower, published.get(range_field(index), lower)), upper))
        lower = upper
    return windows
