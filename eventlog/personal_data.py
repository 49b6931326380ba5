"""The event log's personal data, removed after each service's retention (decision 120).

An event copies its message's recipient (and an error that may quote it) so a receiver needs no
look-up; it is kept NOTIFIER_EVENT_LOG_DAYS (30), longer than the default personal retention
(7). A step of `clients.personal_data` (eventlog's AppConfig registers it): per service and
stream (a message event's `stream`; a consent event, recipient.*, is the broadcast stream's),
the events recorded before the cutoff lose `recipient` (null) and the address quoted in `error`.
The table is append-only, so each (service, stream) walks its (service, recorded_at) index from
a RetentionMark and never reads a stripped event again. A service deleted since keeps its events
(its facts): they are found by a skip scan of the log's service index and kept under the
defaults. The event's id, type, time, message id and the service's references stay.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import connection, transaction

from clients.personal_data import ExpireRun, Mark, Policy, mark_read, mark_write
from core.personal_data import redact
from eventlog.selectors import EVENT_STREAM_SQL
from eventlog.writes import EVENT_TABLE

_STREAM = EVENT_STREAM_SQL
_PICK = (f"SELECT id, recorded_at, data->>'recipient', data->>'error' FROM {EVENT_TABLE} "
         f"WHERE service_id = %s AND recorded_at >= %s AND (recorded_at, id) > (%s, %s) "
         f"AND recorded_at < %s AND {_STREAM} = %s ORDER BY recorded_at, id LIMIT %s")
_STRIP = (f"UPDATE {EVENT_TABLE} AS e SET data = e.data || jsonb_build_object('recipient', NULL) "
          f"|| CASE WHEN e.data ? 'error' THEN jsonb_build_object('error', v.error) ELSE '{{}}'::jsonb END "
          f"FROM unnest(%s::bigint[], %s::text[]) AS v(id, error) WHERE e.id = v.id")
# The services that have events, one index probe each (a skip scan PostgreSQL does not do itself).
_SERVICES = (f"WITH RECURSIVE s(id) AS (SELECT min(service_id) FROM {EVENT_TABLE} UNION ALL "
             f"SELECT (SELECT min(service_id) FROM {EVENT_TABLE} WHERE service_id > s.id) FROM s "
             f"WHERE s.id IS NOT NULL) SELECT id FROM s WHERE id IS NOT NULL")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _policies(run: ExpireRun) -> list[Policy]:
    """The run's services, and the deleted ones that still have events (under the defaults)."""
    known = [policy for policy in run.policies if policy.service_id is not None]
    named = {policy.service_id for policy in known}
    defaults = {policy.stream: policy for policy in run.policies if policy.service_id is None}
    with connection.cursor() as cursor:
        cursor.execute(_SERVICES)
        gone = [row[0] for row in cursor.fetchall() if row[0] not in named]
    return known + [Policy(service_id, stream, defaults[stream].personal_data_days)
                    for service_id in gone for stream in defaults]


def _mark_key(policy: Policy) -> str:
    return f"eventlog:{policy.service_id}:{policy.stream}"


def events_personal_data_step(run: ExpireRun) -> dict[str, int]:
    stripped = 0
    for policy in _policies(run):
        if run.out_of_time():
            break
        before = policy.cutoff(run.as_of)
        if run.dry_run:
            stripped += _count(policy, mark_read(_mark_key(policy)), before)
            continue
        while not run.out_of_time():
            taken, full = _batch(policy, before, run.batch_size)
            stripped += taken
            if not full:
                break
    return {"events": stripped}


def _count(policy: Policy, mark: Mark, before: datetime) -> int:
    sql = (f"SELECT count(*) FROM {EVENT_TABLE} WHERE service_id = %s AND recorded_at >= %s "
           f"AND recorded_at < %s AND {_STREAM} = %s AND data->>'recipient' IS NOT NULL")
    with connection.cursor() as cursor:
        cursor.execute(sql, [policy.service_id, mark.at or EPOCH, before, policy.stream])
        return cursor.fetchone()[0]


def _batch(policy: Policy, before: datetime, limit: int) -> tuple[int, bool]:
    """One batch in one transaction: (events stripped, whether the batch was full)."""
    key = _mark_key(policy)
    with transaction.atomic():
        mark = mark_read(key)
        start = mark.at or EPOCH
        with connection.cursor() as cursor:
            cursor.execute(_PICK, [policy.service_id, start, start, mark.id, before, policy.stream, limit])
            rows = cursor.fetchall()
            due = [(event_id, redact(error, recipient) if error else error)
                   for event_id, _, recipient, error in rows if recipient is not None]
            if due:
                cursor.execute(_STRIP, [[row[0] for row in due], [row[1] for row in due]])
        full = len(rows) == limit
        # A short batch has read everything recorded before the cutoff: the walk resumes there
        # (an event is recorded at its transaction's start, and none runs for days). Nothing
        # read: the mark stays (no write per service and stream each minute).
        if rows:
            mark_write(key, (Mark(rows[-1][1], rows[-1][0]) if full else Mark(before, 0)).at_least(mark))
    return len(due), full
