"""Failover through the sending service, against the fake ESPs (real Postgres and Redis).

Every test counts lost, duplicate and cross-ESP duplicate messages from the fakes' ledgers.
"""

from __future__ import annotations

import uuid

import pytest

from delivery.models import DeadLetter, DeliveryAttempt, EmailMessage
from delivery.services.sending import message_batch_send
from tests.delivery.conftest import ledger_counts
from tests.factories import email_message, template_version

Status = EmailMessage.Status
pytestmark = pytest.mark.django_db


@pytest.fixture
def messages():
    version = template_version()
    return [email_message(version=version, priority=2) for _ in range(20)]


def _ids(messages) -> list[int]:
    return [m.id for m in messages]


def _send(ids):
    return message_batch_send(message_ids=ids, token=uuid.uuid4().hex)


def test_primary_5xx_everything_goes_to_the_secondary_once(settings, esps, messages):
    settings.NOTIFIER_PROVIDERS = ["sendgrid", "mailgun"]
    esps["sendgrid"].faults.error_5xx(503)
    report = _send(_ids(messages))
    assert report.sent == 20
    assert ledger_counts(esps, _ids(messages)) == ([], {}, {})
    assert esps["mailgun"].ledger.count() == 20
    assert set(EmailMessage.objects.values_list("provider", flat=True)) == {"mailgun"}
    assert DeliveryAttempt.objects.filter(provider="sendgrid", outcome="transient").count() == 20


def test_primary_refusing_connections_fails_over(settings, esps, messages):
    settings.NOTIFIER_PROVIDERS = ["ses", "sendgrid"]
    esps["ses"].faults.refuse()
    report = _send(_ids(messages[:3]))
    assert report.sent == 3
    assert ledger_counts(esps, _ids(messages[:3])) == ([], {}, {})


def test_ambiguous_is_held_never_sent_to_the_secondary(settings, esps, messages):
    settings.NOTIFIER_PROVIDERS = ["sendgrid", "mailgun"]
    esps["sendgrid"].faults.accept_then_hang(hang_seconds=2, next_n=1)
    report = _send(_ids(messages[:5]))
    assert report.ambiguous == 5
    assert esps["mailgun"].ledger.count() == 0
    assert set(EmailMessage.objects.filter(id__in=_ids(messages[:5])).values_list("status", flat=True)) == {
        Status.AMBIGUOUS}
    assert ledger_counts(esps, _ids(messages[:5]))[2] == {}


def test_open_breaker_skips_the_primary_without_calling_it(settings, esps, messages):
    settings.NOTIFIER_PROVIDERS = ["sendgrid", "mailgun"]
    settings.NOTIFIER_BREAKER_FAILURES = 2
    esps["sendgrid"].faults.error_5xx(503)
    for message in messages[:2]:
        _send([message.id])
    calls = esps["sendgrid"].ledger.requests()
    assert calls == 2
    report = _send(_ids(messages[2:]))
    assert report.sent == 18
    assert esps["sendgrid"].ledger.requests() == calls  # skipped: no request, no timeout
    assert ledger_counts(esps, _ids(messages)) == ([], {}, {})


def test_permanent_rejection_fails_without_failover(settings, esps, messages):
    settings.NOTIFIER_PROVIDERS = ["sendgrid", "mailgun"]
    esps["sendgrid"].faults.reject_permanent(messages[0].recipient)
    report = _send(_ids(messages[:3]))
    assert (report.sent, report.failed) == (2, 1)
    assert EmailMessage.objects.get(id=messages[0].id).status == Status.FAILED
    assert esps["mailgun"].ledger.count() == 0


def test_429_defers_without_using_an_attempt(settings, esps, messages):
    settings.NOTIFIER_PROVIDERS = ["sendgrid"]
    esps["sendgrid"].faults.rate_limit(3)
    report = _send(_ids(messages[:2]))
    assert sorted(report.deferred_ids) == sorted(_ids(messages[:2]))
    assert report.defer_seconds == 3.0 and report.retry_ids == []
    rows = EmailMessage.objects.filter(id__in=_ids(messages[:2]))
    assert {(m.status, m.attempts) for m in rows} == {(Status.QUEUED, 0)}


def test_transient_failures_dead_letter_after_the_priority_limit(settings, esps, messages):
    settings.NOTIFIER_PROVIDERS = ["sendgrid"]
    settings.NOTIFIER_BREAKER_FAILURES = 1000
    esps["sendgrid"].faults.error_5xx(500)
    message = messages[0]  # priority normal: 8 attempts
    for attempt in range(1, 9):
        report = _send([message.id])
        assert EmailMessage.objects.get(id=message.id).attempts == attempt
    assert (report.retry_ids, report.dead_lettered) == ([], 1)
    dead = DeadLetter.objects.get(message=message)
    assert len(dead.attempts) == 8 and "500" in dead.final_error
    assert dead.payload["recipient"] == message.recipient
    assert EmailMessage.objects.get(id=message.id).status == Status.FAILED


def test_redelivered_batch_is_split_so_a_poison_message_cannot_sink_its_batch(settings, esps, messages):
    settings.NOTIFIER_PROVIDERS = ["sendgrid"]
    ids = _ids(messages[:4])
    from delivery.services import ledger
    ledger.messages_claim(message_ids=ids, token="task-1")  # then the worker process died
    report = message_batch_send(message_ids=ids, token="task-1")  # the broker redelivers it
    assert sorted(report.split_ids) == sorted(ids)
    rows = EmailMessage.objects.filter(id__in=ids)
    assert {(m.status, m.attempts) for m in rows} == {(Status.QUEUED, 1)}
    assert esps["sendgrid"].ledger.requests() == 0
    for message_id in report.split_ids:
        assert _send([message_id]).sent == 1
    assert ledger_counts(esps, ids) == ([], {}, {})


def test_every_breaker_open_defers_without_calling_anyone(settings, esps, messages):
    from delivery.services.circuit_breaker import breaker_record_failure
    settings.NOTIFIER_PROVIDERS = ["sendgrid", "mailgun"]
    for name in ("sendgrid", "mailgun"):
        breaker_record_failure(provider=name, retry_after=30)
    report = _send(_ids(messages[:3]))
    assert sorted(report.deferred_ids) == sorted(_ids(messages[:3]))
    assert esps["sendgrid"].ledger.requests() == esps["mailgun"].ledger.requests() == 0
    assert {m.attempts for m in EmailMessage.objects.filter(id__in=_ids(messages[:3]))} == {0}


def test_a_provider_that_raises_holds_the_batch_ambiguous(settings, esps, messages, monkeypatch):
    from delivery.providers import get_provider
    settings.NOTIFIER_PROVIDERS = ["sendgrid", "mailgun"]

    def broken(emails):
        raise KeyError("bug in an adapter")

    monkeypatch.setattr(get_provider("sendgrid"), "send_batch", broken)
    report = _send(_ids(messages[:3]))
    assert report.ambiguous == 3
    assert esps["mailgun"].ledger.count() == 0
    assert set(EmailMessage.objects.filter(id__in=_ids(messages[:3])).values_list("status", flat=True)) == {
        Status.AMBIGUOUS}
