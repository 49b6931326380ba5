"""The log's cursor: a reader never skips an event whose transaction commits after the reader
passed a later one, and never reads an event of a transaction still running (decision 110)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg2
import pytest
from django.utils import timezone

from clients.services import service_create
from eventlog.cursor import START, EventCursor, InvalidCursorError
from eventlog.models import ServiceEvent
from eventlog.selectors import cursor_of, events_after, settled_horizon_cursor
from testkit.processes import database_url
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)

_INSERT = ("INSERT INTO eventlog_serviceevent (service_id, type, message_id, occurred_at, data)"
           " VALUES (%s, 'message.sent', %s, now(), '{}')")


@contextmanager
def _second_connection() -> Iterator[psycopg2.extensions.connection]:
    """Another session's transaction, left open until the block commits it."""
    other = psycopg2.connect(database_url())
    try:
        yield other
    finally:
        other.close()


def _record(service_id: str, message_id: int) -> None:
    ServiceEvent.objects.create(service_id=service_id, type="message.sent", message_id=message_id,
                                occurred_at=timezone.now())


def _settled(
    service_id: str, cursor: EventCursor, count: int, types: list[str] | None = None,
) -> list[ServiceEvent]:
    """The read once `count` events are settled: the horizon is the whole cluster's oldest
    running transaction, which another test database's open transaction may hold a while."""
    deadline = time.monotonic() + 60
    while len(read := events_after(service_id, cursor, 10, types)) < count:
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return read


def test_an_event_committed_late_by_an_older_transaction_is_read_after_the_others() -> None:
    service = factories.owner()
    with _second_connection() as slow:
        slow.cursor().execute(_INSERT, (service.pk, 1))  # its transaction is older and still open
        _record(service.pk, 2)  # a newer transaction, committed at once
        assert events_after(service.pk, START, 10) == []  # held back behind the open one

        slow.commit()
    first_read = _settled(service.pk, START, 2)
    assert [event.message_id for event in first_read] == [1, 2]

    _record(service.pk, 3)
    assert [e.message_id for e in _settled(service.pk, cursor_of(first_read[-1]), 1)] == [3]


def test_a_newer_transaction_committed_first_is_held_until_the_older_one_ends() -> None:
    service = factories.owner()
    _record(service.pk, 1)
    with _second_connection() as slow:
        slow.cursor().execute(_INSERT, (service.pk, 2))
        _record(service.pk, 3)
        read = _settled(service.pk, START, 1)
        assert [event.message_id for event in read] == [1]  # 3 waits for 2's transaction
        slow.commit()
    assert [e.message_id for e in _settled(service.pk, cursor_of(read[-1]), 2)] == [2, 3]


def test_types_and_services_narrow_the_read() -> None:
    service = factories.owner()
    other, _ = service_create(name="other")
    ServiceEvent.objects.create(service_id=service.pk, type="message.delivered", message_id=1,
                                occurred_at=timezone.now())
    _record(service.pk, 2)
    _record(other.pk, 3)
    assert [e.message_id for e in _settled(service.pk, START, 1, ["message.sent"])] == [2]
    assert [e.message_id for e in _settled(other.pk, START, 1)] == [3]


def test_the_horizon_starts_a_reader_after_everything_already_settled() -> None:
    service = factories.owner()
    _record(service.pk, 1)
    _settled(service.pk, START, 1)
    horizon = settled_horizon_cursor()
    _record(service.pk, 2)
    assert [e.message_id for e in _settled(service.pk, horizon, 1)] == [2]


def test_a_cursor_round_trips_and_a_forged_one_is_refused() -> None:
    cursor = EventCursor(123456789012, 42)
    assert EventCursor.decode(cursor.encode()) == cursor
    for forged in ("", "!!", "bm90LWEtY3Vyc29y", EventCursor(1, 2).encode() + "x"):
        with pytest.raises(InvalidCursorError):
            EventCursor.decode(forged)
