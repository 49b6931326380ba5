"""Reading a service's log after a cursor, never past a transaction still running."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime

from django.db import connection

from clients.retention import STREAM_OF_RECIPIENT_EVENTS
from eventlog.cursor import EventCursor
from eventlog.models import ServiceEvent

# Only rows of finished transactions: a row whose txid is at or above the oldest running
# transaction may still be joined by a lower (txid, id) committed later (decision 110).
HORIZON_SQL = "pg_snapshot_xmin(pg_current_snapshot())"
_EVENTS_AFTER = (
    "SELECT * FROM eventlog_serviceevent"
    " WHERE service_id = %s AND (txid, id) > (%s::text::xid8, %s)"
    f" AND txid < {HORIZON_SQL}{{types}}{{retention}}"
    " ORDER BY txid, id LIMIT %s"
)
# An event's stream: a message event's own; a consent event (recipient.*) the broadcast stream's.
EVENT_STREAM_SQL = f"COALESCE(data->>'stream', '{STREAM_OF_RECIPIENT_EVENTS}')"


# A cursor's id past any event's: (txid, _PAST_EVERY_ID) is after every event of txid.
_PAST_EVERY_ID = 2**62


def events_after(
    service_id: str, cursor: EventCursor, limit: int, types: Collection[str] | None = None,
    visible_since: Mapping[str, datetime] | None = None,
) -> list[ServiceEvent]:
    """The service's next `limit` settled events after `cursor`, in log order, of `types` only
    when given (the others are passed over: the next cursor is the last event returned), and
    none recorded before `visible_since` of its stream (the metadata retention, 120)."""
    params: list[object] = [service_id, str(cursor.txid), cursor.id]
    type_clause = retention_clause = ""
    if types is not None:
        type_clause = " AND type = ANY(%s)"
        params.append(list(types))
    if visible_since:
        oldest = min(visible_since.values())
        retention_clause = " AND recorded_at >= %s"
        params.append(oldest)
        for stream, since in visible_since.items():
            if since > oldest:
                retention_clause += f" AND ({EVENT_STREAM_SQL} <> %s OR recorded_at >= %s)"
                params += [stream, since]
    params.append(limit)
    sql = _EVENTS_AFTER.format(types=type_clause, retention=retention_clause)
    return list(ServiceEvent.objects.raw(sql, params))


def cursor_of(event: ServiceEvent) -> EventCursor:
    return EventCursor(event.txid, event.id)


def horizon_xid() -> int:
    """The oldest transaction still running: every event below it is settled (decision 110)."""
    with connection.cursor() as cur:
        cur.execute(f"SELECT {HORIZON_SQL}::text")
        return int(cur.fetchone()[0])


def settled_horizon_cursor() -> EventCursor:
    """A cursor past every settled event and below every transaction still running: where a
    reader that wants only what happens from now on starts (e.g. a new endpoint)."""
    return cursor_below(horizon_xid())


def cursor_below(xid: int) -> EventCursor:
    """A cursor past every event of the transactions older than `xid`."""
    return EventCursor(xid - 1, _PAST_EVERY_ID)


def since_cursor(service_id: str, since: datetime) -> EventCursor:
    """Where a reader that wants the service's events recorded at or after `since` starts: just
    below the oldest transaction that recorded one (index-only, on (service, recorded_at)
    INCLUDE txid), or below every running transaction when none is settled yet. It may also
    return a few events of a transaction that began before `since` and wrote after it: a
    reader is told "at least from then", never a gap."""
    with connection.cursor() as cur:
        cur.execute("SELECT min(txid)::text FROM eventlog_serviceevent WHERE service_id = %s"
                    " AND recorded_at >= %s", [service_id, since])
        (oldest,) = cur.fetchone()
    horizon = settled_horizon_cursor()
    if oldest is None:
        return horizon
    return min(horizon, cursor_below(int(oldest)))


def events_page(
    service_id: str, cursor: EventCursor, limit: int, types: Collection[str] | None = None,
    visible_since: Mapping[str, datetime] | None = None,
) -> tuple[list[ServiceEvent], EventCursor]:
    """A reader's page: up to `limit` settled events after `cursor`, and the cursor to go on
    from. A short page has examined every event settled when it was read, so its cursor moves
    on to that horizon (taken before the read: the read's own horizon is at least as far), and
    a filtered poller never walks the same passed-over events twice. With `visible_since` (the
    service's metadata retention), a cursor older than the oldest event still shown starts at
    that event's transaction (one index-only probe), so hidden events are not walked."""
    horizon = settled_horizon_cursor()
    if visible_since:
        cursor = max(cursor, since_cursor(service_id, min(visible_since.values())))
    events = events_after(service_id, cursor, limit, types, visible_since)
    last = cursor_of(events[-1]) if events else cursor
    if len(events) < limit:
        return events, max(last, horizon, cursor)
    return events, last
