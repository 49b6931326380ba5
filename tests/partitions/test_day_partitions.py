"""Messages, attempts, ESP events and marks partitioned by their id (issue 30, decision 122): an
id carries its UTC day and its row lives in the partition of that day's span (a week); an idempotency key
is honoured across the day boundary; a day with no partition gets one from the insert that needs
it; expiry drops whole days past the longest metadata retention, never a day with a message in
flight, and an ESP event about a message whose day is gone is still recorded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from clients.models import Service
from core.partitions import catalog
from core.partitions.catalog import partitions_of
from core.partitions.create import days_ensure
from core.partitions.routing import floors_forget
from core.partitions.spec import day_floor, day_number, partition_name, span_start
from delivery.models import DeadLetter, DeliveryAttempt, EmailMessage
from delivery.partitioning import ATTEMPTS, MESSAGES
from delivery.providers.base import Outcome, SendResult
from delivery.services.ledger.attempts import attempts_record
from feedback.models import EmailEvent, MessageEventMark
from feedback.normalize import EventType
from feedback.partitioning import EVENTS, MARKS
from feedback.services.processing import events_process
from tests import factories
from tests.feedback.helpers import event

OTP = {"to": "ada@example.com", "template": "otp", "priority": "critical",
       "context": {"name": "Ada", "code": "1"}}
TODAY = day_number(datetime.now(UTC))


def _named(table: str, day: int) -> str:
    """The partition holding `day`'s rows (named by the first day of its span)."""
    return partition_name(table, span_start(day))


def _partition_of(table: str, row_id: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tableoid::regclass::text FROM {table} WHERE id = %s", [row_id])
        return cursor.fetchone()[0]


def _exists(name: str) -> bool:
    with connection.cursor() as cursor:
        return catalog.exists(cursor, name)


def _days(*days: int) -> None:
    with connection.cursor() as cursor:
        for spec in (MESSAGES, ATTEMPTS, EVENTS, MARKS):
            days_ensure(cursor, spec, days)


def _move_to_day(message_id: int, day: int, n: int = 1) -> int:
    """Give a message an id of `day` (its row moves to that day's partition)."""
    new_id = day_floor(day) + n
    EmailMessage.objects.filter(pk=message_id).update(id=new_id)
    return new_id


def _old_messages(day: int, count: int, *, status: str = "SENT", **fields) -> list[EmailMessage]:
    version = factories.template_version()
    made = []
    for n in range(count):
        message = factories.email_message(version=version, status=status, **fields)
        made.append(EmailMessage.objects.get(pk=_move_to_day(message.pk, day, n + 1)))
    EmailMessage.objects.filter(pk__in=[m.pk for m in made]).update(
        created_at=datetime.combine(datetime(1970, 1, 1) + timedelta(days=day), datetime.min.time(),
                                    tzinfo=UTC) + timedelta(hours=12))
    return made


def _expire(*args: str) -> str:
    out = StringIO()
    call_command("expire_data", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_a_message_id_carries_its_day_and_its_row_is_in_that_days_partition(api, otp_template):
    response = api.post("/api/v1/messages", OTP, format="json")
    assert response.status_code == 202, response.content
    message_id = response.json()["id"]
    assert message_id >> 32 == TODAY and message_id < 2**53  # a JSON number every client reads exactly
    assert _partition_of(MESSAGES.table, message_id) == _named(MESSAGES.table, TODAY)
    parts = partitions_of(connection.cursor(), MESSAGES.table)
    covered = {day for part in parts for day in range(part.day, part.last_day + 1)}
    assert set(range(TODAY, TODAY + 8)) <= covered  # a week ahead exists from the migration on
    assert all(part.last_day - part.day == 6 and part.day % 7 == 4 for part in parts)  # Monday to Sunday


@pytest.mark.django_db
def test_an_idempotency_key_of_yesterday_replays_its_message_and_an_older_one_makes_a_new_one(
        api, otp_template):
    _days(TODAY - 1, TODAY - 9)
    floors_forget()
    first = api.post("/api/v1/messages", {**OTP, "idempotency_key": "k-yesterday"}, format="json")
    yesterday_id = _move_to_day(first.json()["id"], TODAY - 1)
    again = api.post("/api/v1/messages", {**OTP, "idempotency_key": "k-yesterday"}, format="json")
    assert again.status_code in (200, 202), again.content
    assert again.json()["id"] == yesterday_id
    assert EmailMessage.objects.count() == 1

    older = api.post("/api/v1/messages", {**OTP, "idempotency_key": "k-old"}, format="json")
    _move_to_day(older.json()["id"], TODAY - 9)
    # Older than the span holding yesterday (the window: at least the rest of its day and the
    # whole next one): a new message.
    renewed = api.post("/api/v1/messages", {**OTP, "idempotency_key": "k-old"}, format="json")
    assert renewed.status_code == 202 and renewed.json()["id"] >> 32 == TODAY
    assert EmailMessage.objects.count() == 3


@pytest.mark.django_db
def test_a_batch_item_whose_key_was_used_yesterday_replays_it(api, otp_template):
    _days(TODAY - 1)
    floors_forget()
    item = {**OTP, "idempotency_key": "batch-k"}
    first = api.post("/api/v1/messages/batch", {"messages": [item]}, format="json")
    assert first.status_code in (200, 202, 207), first.content
    yesterday_id = _move_to_day(first.json()["results"][0]["id"], TODAY - 1)
    again = api.post("/api/v1/messages/batch", {"messages": [item]}, format="json")
    result = again.json()["results"][0]
    assert (result["id"], result.get("replayed")) == (yesterday_id, True), result
    assert EmailMessage.objects.count() == 1


@pytest.mark.django_db
def test_an_esp_event_repeated_the_next_day_is_stored_once():
    _days(TODAY - 1)
    floors_forget()
    (message,) = _old_messages(TODAY, 1)
    repeated = event(message, EventType.DELIVERED, event_id="esp-evt-1")
    events_process(events=[repeated])
    stored = EmailEvent.objects.get(provider_event_id="esp-evt-1")
    EmailEvent.objects.filter(pk=stored.pk).update(id=day_floor(TODAY - 1) + 1)
    events_process(events=[repeated])
    assert EmailEvent.objects.filter(provider_event_id="esp-evt-1").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_missing_days_partition_is_created_by_the_insert_that_needs_it(api, otp_template):
    for spec in (MESSAGES, ATTEMPTS):
        name = _named(spec.table, TODAY)
        with connection.cursor() as cursor:
            cursor.execute(f'ALTER TABLE {spec.table} DETACH PARTITION "{name}"')
            cursor.execute(f'DROP TABLE "{name}"')
        assert not _exists(name)

    response = api.post("/api/v1/messages", OTP, format="json")
    assert response.status_code == 202, response.content
    message_id = response.json()["id"]
    assert _partition_of(MESSAGES.table, message_id) == _named(MESSAGES.table, TODAY)
    attempts_record(provider="smtp", results=[SendResult(message_id, Outcome.ACCEPTED)])
    attempt = DeliveryAttempt.objects.get(message_id=message_id)
    assert _partition_of(ATTEMPTS.table, attempt.pk) == _named(ATTEMPTS.table, TODAY)


@pytest.mark.django_db
def test_expiry_drops_whole_days_past_the_longest_retention_and_keeps_a_day_in_flight(settings):
    settings.NOTIFIER_RETENTION_METADATA_DAYS = 90
    old, in_flight, kept = TODAY - 130, TODAY - 115, TODAY - 60  # three weeks
    _days(old, in_flight, kept)
    expired = _old_messages(old, 3)
    DeadLetter.objects.create(message=expired[0], final_error="x")
    MessageEventMark.objects.create(message=expired[1], event_type="delivered", first_at=timezone.now())
    attempts_record(provider="smtp", results=[SendResult(m.pk, Outcome.ACCEPTED) for m in expired])
    for n, attempt in enumerate(DeliveryAttempt.objects.all(), 1):  # the attempt rows of that day too
        DeliveryAttempt.objects.filter(pk=attempt.pk).update(id=day_floor(old) + n)
    (scheduled,) = _old_messages(in_flight, 1, status="SCHEDULED",
                                 scheduled_for=timezone.now() + timedelta(days=1))
    recent = _old_messages(kept, 2)

    # A service keeping its metadata 200 days holds every day back.
    longer = Service.objects.create(id="longer", name="Longer", retention={
        "transactional": {"metadata_days": 200}})
    assert "no day partition is older than" in _expire()
    assert EmailMessage.objects.count() == 6
    longer.delete()

    dry = _expire("--dry-run")
    assert f"would drop {_named(MESSAGES.table, old)}" in dry, dry
    assert EmailMessage.objects.count() == 6
    out = _expire()
    for spec in (MESSAGES, ATTEMPTS, MARKS):
        assert f"dropped {_named(spec.table, old)}" in out, out
        assert not _exists(_named(spec.table, old))
    assert f"kept {_named(MESSAGES.table, in_flight)}" in out, out
    assert set(EmailMessage.objects.values_list("pk", flat=True)) == {scheduled.pk, *(m.pk for m in recent)}
    assert not DeadLetter.objects.exists() and not MessageEventMark.objects.exists()
    assert not DeliveryAttempt.objects.exists()


@pytest.mark.django_db
def test_a_late_esp_event_about_a_message_whose_day_was_dropped_is_recorded(settings):
    settings.NOTIFIER_RETENTION_METADATA_DAYS = 90
    old = TODAY - 100
    _days(old)
    (message,) = _old_messages(old, 1)
    _expire()
    assert not EmailMessage.objects.filter(pk=message.pk).exists()

    late = event(message, EventType.OPENED, event_id="late-open")
    events_process(events=[late])
    stored = EmailEvent.objects.get(provider_event_id="late-open")
    assert stored.message_id is None and stored.event_type == "opened"
    assert _partition_of(EVENTS.table, stored.pk) == _named(EVENTS.table, TODAY)
