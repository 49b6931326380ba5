"""The SMTP send journal (decision 92): a worker SIGKILLed in the middle of an SMTP batch leaves
proof of what never left. Real worker subprocess, real Redis and PostgreSQL, a recording SMTP
server that hangs on the sixth message; the recovery then marks the five accepted SENT, holds
the one in flight AMBIGUOUS and publishes the fourteen never started again, which a new worker
sends: no message twice, none lost but the one whose fate only the server knows."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from delivery.models import AmbiguityRecord, EmailMessage
from delivery.providers.base import Outcome, SendResult
from delivery.services import ledger
from delivery.services.dispatch import messages_enqueue
from delivery.services.recovery import stalled_messages_recover
from delivery.services.send_journal import SendJournal, journal_close
from delivery.services.stalled_sends import stalled_sends_settle
from testkit import processes
from tests.factories import email_message, template_version

Status = EmailMessage.Status
BATCH = 20
HANGS_AT = 5  # the sixth message's DATA gets no reply before the worker dies


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.mark.e2e
@pytest.mark.slow
def test_a_worker_killed_mid_smtp_batch_loses_nothing_and_sends_nothing_twice(
    process_env, spawn, smtp_server, settings, tmp_path
):
    settings.NOTIFIER_PROVIDERS = ["smtp"]
    settings.NOTIFIER_AMBIGUOUS_AFTER_SECONDS = 1
    env = {**process_env, "NOTIFIER_PROVIDERS": "smtp", "NOTIFIER_REDIS_PREFIX": settings.REDIS_KEY_PREFIX}
    smtp_server.handler.hang_from, smtp_server.handler.hang_seconds = HANGS_AT, 3.0
    version = template_version()
    ids = [email_message(version=version, priority=2).id for _ in range(BATCH)]
    worker = spawn(processes.celery_worker("normal", env, tmp_path))
    worker.wait_for_log("ready.", timeout=60)
    messages_enqueue(message_ids=ids, priority=2)
    _wait(lambda: len(smtp_server.handler.ids()) >= HANGS_AT, 60, "the batch never started")
    time.sleep(0.5)  # the sixth body is on the wire, its reply awaited
    worker.kill_group()  # the whole pool: nothing of this batch will answer
    time.sleep(settings.NOTIFIER_AMBIGUOUS_AFTER_SECONDS + 0.5)

    report = stalled_messages_recover()
    rows = dict(EmailMessage.objects.filter(id__in=ids).values_list("id", "status"))
    assert Counter(rows.values()) == {Status.SENT: HANGS_AT, Status.AMBIGUOUS: 1,
                                      Status.QUEUED: BATCH - HANGS_AT - 1}, rows
    assert report.ambiguous == 1
    in_flight = next(pk for pk, status in rows.items() if status == Status.AMBIGUOUS)
    assert in_flight == ids[HANGS_AT]
    never_left = AmbiguityRecord.objects.filter(message_id__in=ids, reason="never_started")
    assert never_left.count() == BATCH - HANGS_AT - 1

    smtp_server.handler.hang_seconds = 0.0  # the server is well again
    spawn(processes.celery_worker("normal", env, tmp_path)).wait_for_log("ready.", timeout=60)
    _wait(lambda: not EmailMessage.objects.filter(id__in=ids, status=Status.QUEUED).exists(), 60,
          "the released messages were not sent again")
    _wait(lambda: len(smtp_server.handler.ids()) >= BATCH - 1, 30, "the released messages never landed")
    received = Counter(int(i) for i in smtp_server.handler.ids())
    duplicates = {pk: n for pk, n in received.items() if n > 1}
    assert duplicates == {}
    # Every message but the one in flight arrived; that one (its body sent, no reply) may or
    # may not have been taken (this server drops it when the client vanishes): it is held,
    # never sent blindly again, for an operator (SMTP sends no events).
    assert set(ids) - set(received) <= {in_flight}
    assert EmailMessage.objects.get(id=in_flight).status == Status.AMBIGUOUS


def _handed_over(n: int) -> tuple[str, list[int]]:
    version = template_version()
    ids = [email_message(version=version).id for _ in range(n)]
    token = uuid.uuid4().hex
    ledger.messages_claim(message_ids=ids, token=token)
    ledger.messages_mark_started(message_ids=ids, token=token, provider="smtp")
    return token, ids


@pytest.mark.django_db(transaction=True)
def test_a_batch_with_no_journal_is_held_whole():
    _, ids = _handed_over(3)
    report = stalled_sends_settle(started_before=_later())
    assert (report.ambiguous, report.released, report.sent) == (3, 0, 0)
    assert set(EmailMessage.objects.filter(id__in=ids).values_list("status", flat=True)) == {Status.AMBIGUOUS}


@pytest.mark.django_db(transaction=True)
def test_a_closed_journal_stops_a_stuck_worker_at_its_next_message():
    token, ids = _handed_over(3)
    journal = SendJournal(token)
    journal.opened("smtp")
    assert journal.starting(ids[0])
    journal.answered(SendResult(ids[0], Outcome.ACCEPTED, provider_message_id="q1"))
    assert journal.starting(ids[1])  # writes the first answer with it, in one call
    journal.answered(SendResult(ids[1], Outcome.ACCEPTED, provider_message_id="q2"))
    report = stalled_sends_settle(started_before=_later())  # the recovery closes it
    # The second answer was still in the stuck worker: its message may have left, so it is held.
    assert (report.sent, report.ambiguous, report.released) == (1, 1, 1)
    assert not journal.starting(ids[2])  # the worker wakes up: it must not send what was released
    journal.finished()  # nor write to the closed journal
    assert EmailMessage.objects.get(id=ids[0]).provider_message_id == "q1"
    assert journal_close(token).started == {ids[0], ids[1]}


@pytest.mark.django_db(transaction=True)
def test_the_last_answer_is_written_when_the_batch_ends():
    token, ids = _handed_over(2)
    journal = SendJournal(token)
    journal.opened("smtp")
    for pk in ids:
        assert journal.starting(pk)
        journal.answered(SendResult(pk, Outcome.ACCEPTED, provider_message_id=f"q{pk}"))
    journal.finished()
    read = journal_close(token)
    assert read.started == set(ids)
    assert read.answers == {pk: (Outcome.ACCEPTED, f"q{pk}") for pk in ids}


def _later() -> datetime:
    return timezone.now() + timedelta(hours=1)


@pytest.mark.django_db(transaction=True)
def test_a_journal_closed_before_it_opened_stays_closed():
    token, _ = _handed_over(1)
    assert journal_close(token).opened is False  # the recovery came first: it holds the batch
    journal = SendJournal(token)
    journal.opened("smtp")
    assert journal.open is False  # unjournaled: nothing it writes could be read as proof
    assert journal_close(token).started == set()
