"""Reading a service's log after a cursor, never past a transaction still running."""

from __future__ import annotations

from collections.abc import Collection

from django.db import connection

from eventlog.cursor import EventCursor
from eventlog.models import ServiceEvent

# Only rows of finished transactions: a row whose txid is at or above the oldest running
# transaction may still be joined by a lower (txid, id) committed later (decision 110).
_EVENTS_AFTER = (
    "SELECT * FROM eventlog_serviceevent"
    " WHERE service_id = %s AND (txid, id) > (%s::text::xid8, %s)"
    " AND txid < pg_snapshot_xmin(pg_current_snapshot()){types}"
    " ORDER BY txid, id LIMIT %s"
)


def events_after(
    service_id: str, cursor: EventCursor, limit: int, types: Collection[str] | None = None,
) -> list[ServiceEvent]:
    """The service's next `limit` settled events after `cursor`, in log order, of `types` only
    when given (the others are passed over: the next cursor is the last event returned)."""
    params: list[object] = [service_id, str(cursor.txid), cursor.id]
    type_clause = ""
    if types is not None:
        type_clause = " AND type = ANY(%s)"
        params.append(list(types))
    params.append(limit)
    return list(ServiceEvent.objects.raw(_EVENTS_AFTER.format(types=type_clause), params))


def cursor_of(event: ServiceEvent) -> EventCursor:
    return EventCursor(event.txid, event.id)


def settled_horizon_cursor() -> EventCursor:
    """A cursor past every settled event and below every transaction still running: where a
    reader that wants only what happens from now on starts (e.g. a new endpoint)."""
    with connection.cursor() as cur:
        cur.execute("SELECT pg_snapshot_xmin(pg_current_snapshot())::text")
        (xmin,) = cur.fetchone()
    return EventCursor(int(xmin) - 1, 2**62)
