"""AMBIGUOUS sends settled by asking the ESP (issue 32): Mailgun's events API and SendGrid's Email
Activity API, searched by our id. A send the ESP has is SENT, never re-sent; one it has not, once
its search is complete (past the consistency threshold), is re-sent once through it, with no
wait for its events; an account without the lookup, a slow or rate-limited lookup leave the
event-window rule to decide, and never hold the sweep. Real fake-ESP servers on 127.0.0.1
answering from what they received, real PostgreSQL, Redis and ledger; every test counts lost
and duplicate messages at the fakes."""

from __future__ import annotations

import logging
import time
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.models import AmbiguityRecord, EmailMessage, ProviderEventCoverage
from delivery.services.ambiguity import ambiguous_messages_resolve, next_step
from delivery.services.esp_lookup import lookup_off_reason
from delivery.services.sending import message_batch_send
from testkit.fakes import FakeSendGrid
from testkit.fakes.http_base import HttpReply
from testkit.fakes.sendgrid import MESSAGE_ID_ARG, unique_arg_values
from tests.delivery.conftest import ledger_counts
from tests.factories import email_message, template_version
from tests.support.ambiguous_rows import queued_tasks, sent_with_event, worker_lost

Status = EmailMessage.Status
Kind = AmbiguityRecord.Kind
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_broker")]
PROVIDERS = ["sendgrid", "mailgun"]
COMPLETE_AFTER = 600  # the consistency threshold the tests run with (default: 30 min)
WINDOW = 60
# HTTP requests of one lookup that finds something: SendGrid answers a batch in one; Mailgun's
# events are read page by page until an empty page ends the range.
REQUESTS_PER_LOOKUP = {"sendgrid": 1, "mailgun": 2}


@pytest.fixture(autouse=True)
def lookup(settings) -> None:
    settings.NOTIFIER_AMBIGUOUS_LOOKUP = True
    settings.NOTIFIER_AMBIGUOUS_LOOKUP_INTERVAL_SECONDS = 0  # every sweep may ask, unless a test says
    settings.NOTIFIER_AMBIGUOUS_LOOKUP_TIMEOUT_SECONDS = 1.0
    settings.NOTIFIER_AMBIGUOUS_LOOKUP_COMPLETE_AFTER_SECONDS = COMPLETE_AFTER
    settings.NOTIFIER_AMBIGUOUS_EVENT_WINDOW_SECONDS = WINDOW


def _ambiguous_at_the_esp(esps: dict, provider: str, count: int) -> list[EmailMessage]:
    """`count` messages the ESP took in one request and never answered (read timeout)."""
    esps[provider].faults.accept_then_hang(hang_seconds=3, next_n=1)
    version = template_version()
    messages = [email_message(version=version, priority=2) for _ in range(count)]
    report = message_batch_send(message_ids=[m.id for m in messages], token=uuid.uuid4().hex, priority=2)
    assert report.ambiguous == count
    return messages


def _resend_queued(esps: dict, provider: str, priority: int = 0) -> list[int]:
    """Run the re-send tasks the sweep queued (pinned to `provider`); the ids they sent."""
    sent = []
    for args in queued_tasks(priority):
        assert args[3] == provider  # pinned: never another ESP
        report = message_batch_send(message_ids=args[0], token=uuid.uuid4().hex, priority=priority,
                                    pinned=provider)
        assert report.sent == len(args[0])
        sent += args[0]
    return sent


def _status(message: EmailMessage) -> str:
    return EmailMessage.objects.get(id=message.id).status


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_send_the_esp_took_is_settled_by_its_lookup_never_resent(esps, settings, provider):
    settings.NOTIFIER_PROVIDERS = [provider]
    fake = esps[provider]
    taken = _ambiguous_at_the_esp(esps, provider, 3)
    never = worker_lost(provider, at=timezone.now() - timedelta(seconds=30))  # never reached it
    report = ambiguous_messages_resolve()
    assert (report.settled, report.resent) == (3, 0)
    assert fake.lookup_requests == REQUESTS_PER_LOOKUP[provider]  # the four rows in one lookup
    (accepted_id,) = {e.provider_message_id.strip("<>") for e in fake.ledger.entries()}
    for message in taken:
        row = EmailMessage.objects.get(id=message.id)
        assert row.status == Status.SENT and row.provider == provider
        assert row.provider_message_id.startswith(accepted_id)
        settled = AmbiguityRecord.objects.get(message_id=message.id, kind=Kind.SETTLED)
        assert (settled.reason, settled.provider) == ("esp_lookup", provider)
        assert settled.evidence["source"] == "lookup" and settled.evidence["api"].startswith("GET /v3/")
        assert settled.evidence["provider_message_id"] == row.provider_message_id
    # Not found, but handed over 30 s ago: the search may not show it yet. Held, not re-sent.
    assert _status(never) == Status.AMBIGUOUS
    assert queued_tasks(0) == queued_tasks(2) == []
    lost, duplicates, cross = ledger_counts(esps, [m.id for m in taken])
    assert (lost, duplicates, cross) == ([], {}, {})
    assert len(fake.ledger.entries()) == 3


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_send_that_never_arrived_is_resent_once_its_search_is_complete(esps, settings, provider):
    settings.NOTIFIER_PROVIDERS = [provider]
    fake = esps[provider]
    lost = worker_lost(provider, at=timezone.now() - timedelta(minutes=5))
    assert ambiguous_messages_resolve().resent == 0  # not found, but younger than the threshold
    assert _status(lost) == Status.AMBIGUOUS and queued_tasks() == []
    later = timezone.now() + timedelta(seconds=COMPLETE_AFTER)  # the same answer, now complete
    assert ambiguous_messages_resolve(now=later).resent == 1
    assert ambiguous_messages_resolve(now=later).resent == 0  # QUEUED: never twice
    resent = AmbiguityRecord.objects.get(message_id=lost.id, kind=Kind.RESENT)
    assert (resent.reason, resent.provider) == ("esp_lookup_not_found", provider)
    assert resent.evidence["source"] == "lookup" and resent.evidence["answer"] == "not found"
    assert not ProviderEventCoverage.objects.exists()  # no webhook coverage was waited for
    assert fake.lookup_requests == 2  # one request each (Mailgun: an empty first page)
    assert _resend_queued(esps, provider) == [lost.id]
    assert ledger_counts(esps, [lost.id]) == ([], {}, {})
    assert [e.message_id for e in fake.ledger.entries()] == [str(lost.id)]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_lagging_search_never_resends_a_recent_send(esps, settings, provider):
    """The ESP took it, but its search does not show it yet (eventual consistency): while the send
    is younger than the threshold, "not found" proves nothing."""
    settings.NOTIFIER_PROVIDERS = [provider]
    fake = esps[provider]
    fake.lookup_lag_seconds = 3600
    (taken,) = _ambiguous_at_the_esp(esps, provider, 1)
    assert ambiguous_messages_resolve().resent == 0
    assert _status(taken) == Status.AMBIGUOUS and queued_tasks(2) == []
    fake.lookup_lag_seconds = 0
    assert ambiguous_messages_resolve().settled == 1
    assert _status(taken) == Status.SENT
    assert ledger_counts(esps, [taken.id]) == ([], {}, {})


@pytest.mark.parametrize(("provider", "refusal", "says"), [
    ("sendgrid", HttpReply.json(403, {"errors": [{"field": None, "message": "access forbidden"}]}),
     "access forbidden"),
    ("sendgrid", HttpReply.json(400, {"errors": [{"message": "authorization required"}]}),
     "authorization required"),
    ("mailgun", HttpReply(401, b"Forbidden", {"Content-Type": "text/plain"}), "Forbidden"),
])
def test_an_account_without_the_lookup_turns_it_off_and_the_event_window_decides(
        esps, settings, caplog, provider, refusal, says):
    settings.NOTIFIER_PROVIDERS = [provider]
    fake = esps[provider]
    fake.lookup_refusal = refusal
    t0 = timezone.now() - timedelta(minutes=30)
    lost = worker_lost(provider, at=t0)
    assert next_step(provider, None).startswith(f"{provider} is asked every 0 s")
    with caplog.at_level(logging.WARNING, logger="delivery.services.esp_lookup"):
        assert ambiguous_messages_resolve().resent == 0  # no lookup, no events yet: held
    assert "turned off" in caplog.text and says in caplog.text
    assert says in lookup_off_reason(provider)
    assert next_step(provider, None).startswith(f"{provider}'s lookup is off for now (HTTP ")
    sent_with_event(provider, at=t0 + timedelta(seconds=WINDOW + 5))  # its events cover later sends
    assert ambiguous_messages_resolve().resent == 1
    assert AmbiguityRecord.objects.get(message_id=lost.id, kind=Kind.RESENT).reason == "no_event_in_window"
    assert fake.lookup_requests == 1  # off: not asked again
    assert _resend_queued(esps, provider) == [lost.id]
    assert ledger_counts(esps, [lost.id]) == ([], {}, {})


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_slow_lookup_never_stalls_the_sweep(esps, settings, provider):
    settings.NOTIFIER_PROVIDERS = [provider]
    settings.NOTIFIER_AMBIGUOUS_LOOKUP_TIMEOUT_SECONDS = 0.5
    settings.NOTIFIER_AMBIGUOUS_LOOKUP_INTERVAL_SECONDS = 30
    fake = esps[provider]
    fake.lookup_delay_seconds = 10
    t0 = timezone.now() - timedelta(minutes=30)
    lost = worker_lost(provider, at=t0)
    recent = worker_lost(provider, at=timezone.now() - timedelta(seconds=10))
    sent_with_event(provider, at=t0 + timedelta(seconds=WINDOW + 5))
    started = time.monotonic()
    report = ambiguous_messages_resolve()
    assert time.monotonic() - started < 2.0  # the 0.5 s timeout, not the ESP's 10 s
    assert report.resent == 1  # the event window decided
    assert AmbiguityRecord.objects.get(message_id=lost.id, kind=Kind.RESENT).reason == "no_event_in_window"
    started = time.monotonic()
    ambiguous_messages_resolve()  # `recent` is still held: not asked again within the interval
    assert time.monotonic() - started < 0.5
    assert fake.lookup_requests == 1 and _status(recent) == Status.AMBIGUOUS
    assert _resend_queued(esps, provider) == [lost.id]
    assert ledger_counts(esps, [lost.id]) == ([], {}, {})


@pytest.mark.parametrize(("provider", "answer"), [
    ("sendgrid", {"messages": "not a list"}), ("mailgun", {"items": ["not an event"]})])
def test_an_answer_the_lookup_cannot_read_never_stops_the_sweep(esps, settings, caplog, provider, answer):
    settings.NOTIFIER_PROVIDERS = [provider]
    esps[provider].lookup_refusal = HttpReply.json(200, answer)
    t0 = timezone.now() - timedelta(minutes=30)
    lost = worker_lost(provider, at=t0)
    sent_with_event(provider, at=t0 + timedelta(seconds=WINDOW + 5))
    with caplog.at_level(logging.ERROR, logger="delivery.services.esp_lookup"):
        assert ambiguous_messages_resolve().resent == 1  # the event window decided
    assert f"ESP lookup at {provider} failed" in caplog.text
    assert AmbiguityRecord.objects.get(message_id=lost.id, kind=Kind.RESENT).reason == "no_event_in_window"
    assert _resend_queued(esps, provider) == [lost.id]
    assert ledger_counts(esps, [lost.id]) == ([], {}, {})


def test_the_activity_apis_rate_limit_is_waited_out(esps, settings):
    """SendGrid allows the Email Activity API 6 requests a minute; past it, a 429 whose
    X-RateLimit-Reset keeps every scheduler from asking until then."""
    settings.NOTIFIER_PROVIDERS = ["sendgrid"]
    fake = esps["sendgrid"]
    fake.activity_requests_per_minute = 1
    held = worker_lost("sendgrid", at=timezone.now() - timedelta(seconds=30))
    for _ in range(4):
        ambiguous_messages_resolve()
    assert fake.lookup_requests == 2  # one answered, one 429, then none until the reset
    assert _status(held) == Status.AMBIGUOUS


def test_each_lookup_asks_the_next_rows_in_turn(settings):
    """A batch per call, the cursor walking the held rows round and round: rows the ESP cannot
    settle yet never keep the others from being asked."""
    with FakeSendGrid(record_requests=True) as fake:
        settings.SENDGRID_API_URL, settings.SENDGRID_API_KEY = fake.url, "test-sendgrid-key"
        settings.NOTIFIER_PROVIDERS = ["sendgrid"]
        settings.NOTIFIER_AMBIGUOUS_LOOKUP_BATCH = 2
        a, b, c = (worker_lost("sendgrid", at=timezone.now() - timedelta(seconds=30)).id for _ in range(3))
        for _ in range(3):
            ambiguous_messages_resolve()
        asked = [unique_arg_values(r.query["query"][0], MESSAGE_ID_ARG) for r in fake.received()]
    assert asked == [{str(a), str(b)}, {str(c), str(a)}, {str(b), str(c)}]
