"""First occurrence of each event type per message (MessageEventMark), the basis of unique counts.

`marks_record` inserts (message, type, time) with ON CONFLICT DO NOTHING RETURNING: the rows it
returns are exactly the first opens, first clicks, ... of this batch, so campaign counters are
incremented once per message however often or in whatever order the ESP repeats events. A
later-arriving but earlier-dated occurrence moves `first_at` back (second statement).
An open or click implies delivery (the pixel loaded, the link was followed), so it also marks
`delivered`: an open that overtakes its delivered event still yields DELIVERED + OPENED.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from django.db import connection

from core.partitions.routing import execute_routed
from feedback.models import MessageEventMark
from feedback.normalize import EventType
from feedback.services.events import StoredEvent

MARK_TABLE = MessageEventMark._meta.db_table
MarkKey = tuple[int, str]

# Mark name per event (bounces split by type); events not listed leave no mark.
_MARKED = {
    EventType.DELIVERED: "delivered",
    EventType.OPENED: "opened",
    EventType.CLICKED: "clicked",
    EventType.COMPLAINED: "complained",
    EventType.UNSUBSCRIBED: "unsubscribed",
    EventType.DROPPED: "dropped",
}
_IMPLIES_DELIVERED = {EventType.OPENED, EventType.CLICKED}


def mark_names(stored: StoredEvent) -> list[str]:
    event = stored.event
    if event.event_type is EventType.BOUNCED:
        return ["bounced" if event.bounce_type == "hard" else "soft_bounced"]
    names = [_MARKED[event.event_type]] if event.event_type in _MARKED else []
    if event.event_type in _IMPLIES_DELIVERED:
        names.append("delivered")
    return names


def marks_from_events(events: Iterable[StoredEvent]) -> dict[MarkKey, datetime]:
    """Earliest occurrence per (message id, mark) in this batch."""
    earliest: dict[MarkKey, datetime] = {}
    for stored in events:
        if stored.message is None:
            continue
        for name in mark_names(stored):
            key = (stored.message.id, name)
            when = stored.event.occurred_at
            if key not in earliest or when < earliest[key]:
                earliest[key] = when
    return earliest


def marks_record(*, marks: dict[MarkKey, datetime]) -> tuple[set[MarkKey], set[MarkKey]]:
    """Insert marks; return (new keys, existing keys whose time moved earlier)."""
    if not marks:
        return set(), set()
    keys = sorted(marks)  # one lock order for every batch
    new = _insert(keys, marks, conflict="DO NOTHING RETURNING message_id, event_type")
    rest = [k for k in keys if k not in new]
    moved: set[MarkKey] = set()
    if rest:
        earlier = f"EXCLUDED.first_at < {MARK_TABLE}.first_at"
        conflict = f"DO UPDATE SET first_at = EXCLUDED.first_at WHERE {earlier}"
        moved = _insert(rest, marks, conflict=f"{conflict} RETURNING message_id, event_type")
    return new, moved


def _insert(keys: Sequence[MarkKey], marks: dict[MarkKey, datetime], *, conflict: str) -> set[MarkKey]:
    params: list[object] = []
    for message_id, name in keys:
        params += [message_id, name, marks[(message_id, name)]]
    sql = (
        f"INSERT INTO {MARK_TABLE} (message_id, event_type, first_at) VALUES "
        f"{', '.join(['(%s, %s, %s)'] * len(keys))} ON CONFLICT (message_id, event_type) {conflict}"
    )
    with connection.cursor() as cursor:
        execute_routed(cursor, sql, params)
        return {(r[0], r[1]) for r in cursor.fetchall()} if "RETURNING" in conflict else set()


def marks_for_messages(message_ids: Sequence[int]) -> dict[int, dict[str, datetime]]:
    """All marks of these messages: {message id: {mark: first_at}}."""
    facts: dict[int, dict[str, datetime]] = {}
    # One array parameter, not an ORM-built IN list.
    sql = f"SELECT message_id, event_type, first_at FROM {MARK_TABLE} WHERE message_id = ANY(%s)"
    with connection.cursor() as cursor:
        cursor.execute(sql, [list(message_ids)])
        rows = cursor.fetchall()
    for message_id, name, first_at in rows:
        facts.setdefault(message_id, {})[name] = first_at
    return facts
