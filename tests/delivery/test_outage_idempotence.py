"""The send path's writes that a worker runs again after a database outage swallowed their
answer (core/db_outage.hold_through_outage): each changes its rows once, and never hands
another copy of the task the rows this one marked (decision 82)."""

from __future__ import annotations

import base64
import json
import uuid
from collections import deque
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from core.priorities import queue_for
from delivery import signals
from delivery.models import DeliveryAttempt, EmailMessage
from delivery.services import ledger
from delivery.services.ledger import unflushed
from delivery.tasks import send_batch
from notifier.celery import app as celery_app
from tests.factories import email_message, template_version

Status = EmailMessage.Status
pytestmark = pytest.mark.django_db


def _messages(n: int, *, priority: int = 2) -> list[int]:
    version = template_version()
    return [email_message(version=version, priority=priority).id for _ in range(n)]


def test_the_hand_off_mark_run_again_with_its_instant_returns_its_rows_and_no_other_copy_does():
    ids = _messages(3)
    ledger.messages_claim(message_ids=ids, token="task")
    at = timezone.now()
    assert ledger.messages_mark_started(message_ids=ids, token="task", started_at=at).started == set(ids)
    assert ledger.messages_mark_started(message_ids=ids, token="task", started_at=at).started == set(ids)
    # The same task id redelivered (Celery keeps it) marks with its own instant: nothing.
    later = at + timedelta(microseconds=1)
    assert ledger.messages_mark_started(message_ids=ids, token="task", started_at=later).started == set()
    assert set(EmailMessage.objects.filter(id__in=ids).values_list("send_started_at", flat=True)) == {at}


def test_the_one_row_hand_off_mark_is_idempotent_for_its_instant():
    [pk] = _messages(1, priority=0)
    assert ledger.message_claim_for_send(message_id=pk, token="otp") is not None
    at = timezone.now()
    assert ledger.message_mark_started(message_id=pk, token="otp", started_at=at).started == {pk}
    assert ledger.message_mark_started(message_id=pk, token="otp", started_at=at).started == {pk}
    later = at + timedelta(seconds=1)
    assert not ledger.message_mark_started(message_id=pk, token="otp", started_at=later).started


def test_the_bulk_claim_and_hand_off_run_again_counts_the_attempt_once():
    ids = _messages(2, priority=3)
    at = timezone.now()
    first = ledger.messages_claim_hand_off(message_ids=ids, token="bulk", started_at=at)
    assert first == {pk: (Status.SENDING, 1) for pk in ids}
    assert ledger.messages_claim_hand_off(message_ids=ids, token="bulk", started_at=at) == first
    assert ledger.messages_claim_hand_off(message_ids=ids, token="other", started_at=at) == {}
    later = at + timedelta(microseconds=1)
    assert ledger.messages_claim_hand_off(message_ids=ids, token="bulk", started_at=later) == {}
    assert set(EmailMessage.objects.filter(id__in=ids).values_list("attempts", flat=True)) == {1}


def test_an_answer_held_through_a_long_outage_settles_the_row_the_recovery_held_ambiguous():
    ids = _messages(2)
    ledger.messages_claim(message_ids=ids, token="task")
    ledger.messages_mark_started(message_ids=ids, token="task")
    assert len(ledger.stalled_sends_mark_ambiguous(started_before=timezone.now() + timedelta(hours=1))) == 2
    assert ledger.messages_mark_sent(provider_ids={ids[0]: "p-1"}, provider="smtp", token="other") == 0
    assert ledger.messages_mark_sent(provider_ids={ids[0]: "p-1"}, provider="smtp", token="task") == 1
    assert ledger.messages_mark_sent(provider_ids={ids[0]: "p-1"}, provider="smtp", token="task") == 0
    row = EmailMessage.objects.get(id=ids[0])
    assert (row.status, row.provider_message_id) == (Status.SENT, "p-1")
    # An operator who requeued the other one gave it a new claim: a late answer does not touch it.
    ledger.ambiguous_message_requeue(message_id=ids[1], error="reconciled: never accepted")
    assert ledger.messages_mark_sent(provider_ids={ids[1]: "p-2"}, provider="smtp", token="task") == 0


@pytest.mark.django_db(transaction=True)  # outside a transaction: the prepared statement the pool runs
def test_the_one_row_sent_mark_run_again_writes_one_attempt_row():
    [pk] = _messages(1, priority=0)
    ledger.message_claim_for_send(message_id=pk, token="otp")
    ledger.message_mark_started(message_id=pk, token="otp")
    mark = {"message_id": pk, "token": "otp", "provider": "smtp", "provider_message_id": "<m@x>",
            "response_code": "250", "duration_ms": 3}
    assert ledger.message_mark_sent_with_attempt(**mark)
    assert not ledger.message_mark_sent_with_attempt(**mark)
    assert DeliveryAttempt.objects.filter(message_id=pk).count() == 1
    assert EmailMessage.objects.get(id=pk).status == Status.SENT


def _claims_lost_in_a_crash(sender: object, message_ids: list[int], token: str, **_: object) -> None:
    """What a PostgreSQL crash does to a claim's asynchronous commit (decision 32): gone, the rows
    QUEUED again, though the worker was told it committed."""
    EmailMessage.objects.filter(id__in=message_ids).update(status=Status.QUEUED, claim_token="")


@pytest.mark.parametrize("priority", [2, 0])
def test_rows_whose_claim_was_lost_are_published_again_not_left_queued(priority, settings, esps,
                                                                     purged_queues):
    settings.NOTIFIER_PROVIDERS = ["sendgrid"]
    ids = _messages(3 if priority == 2 else 1, priority=priority)
    signals.batch_claimed.connect(_claims_lost_in_a_crash)
    try:
        # The task with its follow-up, as a worker runs it (the claim token is the task id).
        report = send_batch.apply(args=(ids, priority), task_id=str(uuid.uuid4())).get()
    finally:
        signals.batch_claimed.disconnect(_claims_lost_in_a_crash)
    assert "sent=0" in report
    assert set(EmailMessage.objects.filter(id__in=ids).values_list("status", flat=True)) == {Status.QUEUED}
    assert esps["sendgrid"].ledger.entries() == []  # nothing was offered to the provider
    assert sorted(_published_ids(priority)) == sorted(ids)


def _published_ids(priority: int) -> list[int]:
    """Message ids in the send tasks waiting on a priority's queue (the broker is real Redis)."""
    with celery_app.connection_for_write() as conn:
        raw = conn.default_channel.client.lrange(queue_for(priority), 0, -1)
    return [pk for item in raw for pk in json.loads(base64.b64decode(json.loads(item)["body"]))[0][0]]


@pytest.mark.django_db(transaction=True)
def test_sent_marks_a_crash_lost_are_written_again_by_the_next_connection_to_the_restarted_server():
    ids = _messages(2)
    ledger.messages_claim(message_ids=ids, token="task")
    ledger.messages_mark_started(message_ids=ids, token="task")
    assert ledger.messages_mark_sent(provider_ids={pk: f"p-{pk}" for pk in ids}, provider="smtp",
                                     token="task") == 2
    # What a crash does to those asynchronous commits: gone, the rows handed over with no answer.
    EmailMessage.objects.filter(id__in=ids).update(status=Status.SENDING, provider_message_id="")
    # This process last saw a server that started earlier than the one now running.
    unflushed.recent.server_started = "a server started before the crash"
    connection.close()
    with connection.cursor() as cursor:  # the next connection finds the server restarted
        cursor.execute("SELECT 1")
    assert set(EmailMessage.objects.filter(id__in=ids).values_list("status", "provider_message_id")) == {
        (Status.SENT, f"p-{pk}") for pk in ids}
    assert unflushed.recent.marks == deque()
    connection.close()
    with connection.cursor() as cursor:  # the same server again: nothing to write
        cursor.execute("SELECT 1")
    assert EmailMessage.objects.filter(id__in=ids, status=Status.SENT).count() == 2
