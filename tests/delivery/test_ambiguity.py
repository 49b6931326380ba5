"""AMBIGUOUS sends settled from evidence (decision 89): the hand-off names the one provider that
may have the message, an ESP event settles it as sent, events covering later sends re-send it
through that provider only, a provider without events keeps it held unless the operator opts
in, and every step is logged with its evidence. Real PostgreSQL, Redis broker and fake ESPs."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from campaigns.models import Campaign
from clients.services import service_create
from delivery.models import AmbiguityRecord, EmailMessage, ProviderEventCoverage
from delivery.providers.events import EventType
from delivery.services.ambiguity import ambiguous_messages_resolve
from delivery.services.recovery import stalled_messages_recover
from delivery.services.sending import message_batch_send
from feedback.services.processing import events_process
from tests.delivery.conftest import ledger_counts
from tests.factories import email_message, owner, template_version
from tests.feedback.helpers import campaign as campaign_of
from tests.feedback.helpers import event
from tests.support.ambiguous_rows import (
    handed_over,
    queued_tasks,
    sent_with_event,
    stalled_messages_recover_at,
    worker_lost,
)

Status = EmailMessage.Status
Kind = AmbiguityRecord.Kind
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_broker")]


@pytest.fixture(autouse=True)
def no_lookup(settings) -> None:
    """These are the rules for an ESP that cannot be searched by our id (SES, SMTP, SendGrid
    without its activity add-on): the lookup's own cases are in test_ambiguity_lookup.py."""
    settings.NOTIFIER_AMBIGUOUS_LOOKUP = False


@pytest.fixture
def window(settings) -> int:
    settings.NOTIFIER_AMBIGUOUS_EVENT_WINDOW_SECONDS = 60
    return 60


def test_resent_through_its_provider_only_once_later_sends_have_events(esps, settings, window):
    settings.NOTIFIER_PROVIDERS = ["sendgrid", "mailgun"]
    t0 = timezone.now() - timedelta(minutes=30)
    lost = worker_lost("sendgrid", at=t0)
    assert EmailMessage.objects.get(id=lost.id).status == Status.AMBIGUOUS
    # No events from SendGrid yet: held.
    assert ambiguous_messages_resolve().resent == 0
    # Events for a message handed over before it, or within the window after it: still held.
    sent_with_event("sendgrid", at=t0 - timedelta(seconds=5))
    sent_with_event("sendgrid", at=t0 + timedelta(seconds=window - 5))
    sent_with_event("mailgun", at=t0 + timedelta(minutes=10))  # another ESP's events prove nothing
    assert ambiguous_messages_resolve().resent == 0
    assert queued_tasks() == []
    # SendGrid's events now cover a send made more than the window after it, none about it.
    sent_with_event("sendgrid", at=t0 + timedelta(seconds=window + 5))
    assert ambiguous_messages_resolve().resent == 1
    assert ambiguous_messages_resolve().resent == 0  # QUEUED now: never twice
    (task,) = queued_tasks()
    assert task[0] == [lost.id] and task[3] == "sendgrid"  # pinned
    resent = AmbiguityRecord.objects.get(message_id=lost.id, kind=Kind.RESENT)
    assert resent.reason == "no_event_in_window" and resent.provider == "sendgrid"
    assert resent.evidence["events_cover_sends_until"].startswith(
        (t0 + timedelta(seconds=window + 5)).isoformat()[:19])
    assert AmbiguityRecord.objects.get(message_id=lost.id, kind=Kind.HELD).reason == "worker_lost"
    # The pinned re-send: with SendGrid refusing, it waits for SendGrid; it never goes to Mailgun.
    esps["sendgrid"].faults.refuse()
    report = message_batch_send(message_ids=task[0], token=uuid.uuid4().hex, priority=0, pinned="sendgrid")
    assert report.deferred_ids + report.retry_ids == [lost.id]
    esps["sendgrid"].faults.ok()
    report = message_batch_send(message_ids=task[0], token=uuid.uuid4().hex, priority=0, pinned="sendgrid")
    assert report.sent == 1
    assert EmailMessage.objects.get(id=lost.id).provider == "sendgrid"
    missing, duplicates, cross = ledger_counts(esps, [lost.id])
    assert (missing, duplicates, cross) == ([], {}, {})
    assert not esps["mailgun"].ledger.entries()


def test_an_esp_event_settles_an_ambiguous_send_as_sent_with_its_evidence(window):
    lost = worker_lost("sendgrid", at=timezone.now() - timedelta(minutes=5))
    events_process(events=[event(lost, EventType.DELIVERED, provider="sendgrid", event_id="sg-ev-1")])
    row = EmailMessage.objects.get(id=lost.id)
    assert row.status in (Status.SENT, Status.DELIVERED) and row.provider == "sendgrid"
    settled = AmbiguityRecord.objects.get(message_id=lost.id, kind=Kind.SETTLED)
    assert settled.reason == "esp_event"
    assert settled.evidence["provider_event_id"] == "sg-ev-1" and settled.evidence["event"] == "delivered"
    assert ProviderEventCoverage.objects.get(provider="sendgrid").sent_until == row.send_started_at


def test_a_provider_without_events_stays_held_unless_the_operator_opts_in(settings, window):
    lost = worker_lost("smtp", at=timezone.now() - timedelta(minutes=5))
    assert ambiguous_messages_resolve().held == {"smtp": 1}
    assert queued_tasks() == []
    settings.NOTIFIER_AMBIGUOUS_RESEND_PROVIDERS = ["smtp"]
    assert ambiguous_messages_resolve().resent == 1
    (task,) = queued_tasks()
    assert task[0] == [lost.id] and task[3] == "smtp"
    resent = AmbiguityRecord.objects.get(message_id=lost.id, kind=Kind.RESENT)
    assert resent.reason == "operator_resend_enabled"


def test_a_recent_send_waits_out_the_window_even_when_opted_in(settings, window):
    settings.NOTIFIER_AMBIGUOUS_RESEND_PROVIDERS = ["smtp"]
    worker_lost("smtp", at=timezone.now() - timedelta(seconds=window // 2))
    assert ambiguous_messages_resolve().resent == 0


def test_a_failover_names_the_next_provider_before_offering_it(esps, settings):
    """SendGrid refuses (provably not sent), Mailgun takes the request and never answers: the
    row is AMBIGUOUS at Mailgun, so a re-send could never go to SendGrid (a cross-ESP duplicate)."""
    settings.NOTIFIER_PROVIDERS = ["sendgrid", "mailgun"]
    esps["sendgrid"].faults.refuse()
    esps["mailgun"].faults.accept_then_hang(hang_seconds=3)
    message = email_message(version=template_version())
    report = message_batch_send(message_ids=[message.id], token=uuid.uuid4().hex, priority=2)
    assert report.ambiguous == 1
    row = EmailMessage.objects.get(id=message.id)
    assert (row.status, row.provider) == (Status.AMBIGUOUS, "mailgun")
    held = AmbiguityRecord.objects.get(message_id=message.id, kind=Kind.HELD)
    assert (held.reason, held.provider) == ("no_answer", "mailgun")


def test_the_recovery_holds_a_lost_worker_send_and_logs_why(settings):
    settings.NOTIFIER_AMBIGUOUS_AFTER_SECONDS = 1
    message = handed_over("sendgrid", at=timezone.now() - timedelta(seconds=30))
    assert stalled_messages_recover().ambiguous == 1
    held = AmbiguityRecord.objects.get(message_id=message.id, kind=Kind.HELD)
    assert (held.reason, held.provider) == ("worker_lost", "sendgrid")


def test_the_api_lists_a_service_its_own_ambiguous_sends_by_reason_and_age(api, window):
    mine = worker_lost("sendgrid", at=timezone.now() - timedelta(minutes=10))
    EmailMessage.objects.filter(id=mine.id).update(client=owner())
    other, other_key = service_create(name="someone else")
    theirs = worker_lost("sendgrid", at=timezone.now() - timedelta(minutes=10))
    EmailMessage.objects.filter(id=theirs.id).update(client=other)
    body = api.get("/api/v1/messages/ambiguous").json()
    assert body["total"] == 1 and [row["id"] for row in body["oldest"]] == [mine.id]
    (group,) = body["by_reason"]
    assert (group["reason"], group["provider"], group["count"]) == ("worker_lost", "sendgrid", 1)
    assert "no events from sendgrid" in group["next_step"]
    assert {"age": "5-60 min", "count": 1} in body["by_age"]
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION=f"Api-Key {other_key}")
    assert [row["id"] for row in stranger.get("/api/v1/messages/ambiguous").json()["oldest"]] == [theirs.id]


def test_a_finished_campaigns_row_is_resent_a_cancelled_ones_is_not(window):
    """The campaign of a row that never arrived has usually COMPLETED meanwhile (an AMBIGUOUS row
    is finished for its progress): its re-send is still the campaign's promise."""
    t0 = timezone.now() - timedelta(minutes=30)
    completed, cancelled = campaign_of(), campaign_of()
    kept = worker_lost("sendgrid", at=t0, campaign=completed, priority=2)
    dropped = worker_lost("sendgrid", at=t0, campaign=cancelled, priority=2)
    Campaign.objects.filter(id=completed.id).update(status=Campaign.Status.COMPLETED)
    Campaign.objects.filter(id=cancelled.id).update(status=Campaign.Status.CANCELLED)
    sent_with_event("sendgrid", at=t0 + timedelta(seconds=window + 5))
    assert ambiguous_messages_resolve().resent == 1
    assert EmailMessage.objects.get(id=kept.id).status == Status.QUEUED
    assert EmailMessage.objects.get(id=dropped.id).status == Status.AMBIGUOUS


def test_an_event_stored_while_the_row_was_sending_settles_it_never_a_resend(window):
    """The ESP took it and said so while the worker still held the row (found by the 1M day: the
    row was then held, re-sent, and delivered twice)."""
    t0 = timezone.now() - timedelta(minutes=30)
    message = handed_over("sendgrid", at=t0)
    events_process(events=[event(message, EventType.SENT, provider="sendgrid", event_id="sg-early")])
    assert EmailMessage.objects.get(id=message.id).status == Status.SENDING  # the worker's to finish
    stalled_messages_recover_at(t0 + timedelta(hours=1))  # then the worker is taken for lost
    sent_with_event("sendgrid", at=t0 + timedelta(seconds=window + 5))
    report = ambiguous_messages_resolve()
    assert (report.settled, report.resent) == (1, 0)
    assert EmailMessage.objects.get(id=message.id).status == Status.SENT
    settled = AmbiguityRecord.objects.get(message_id=message.id, kind=Kind.SETTLED)
    assert settled.evidence["provider_event_id"] == "sg-early"
    assert queued_tasks() == []
