"""Personal data is removed after each service's retention while every count stays (issue 30,
decision 120): `manage.py expire_data` strips the messages of a campaign and of one-off sends
(address, context, the address quoted in attempts, dead letters and ambiguity evidence, the ESP
events' addresses and payloads, the event log's copies, the raw webhook bodies) and the campaign
statistics, the dashboard and the counters read the same before and after. Rows in flight are
never touched; each stream keeps its own retention; rows of a deleted service are kept under
the defaults; a scrubbed FAILED row is never requeued."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils import timezone

from audience.models import Stream
from campaigns.selectors import campaign_status_counts
from clients.retention import STREAMS
from clients.services import service_create
from core.personal_data import REDACTED, recipient_hash
from delivery.models import SETTLED_STATUSES, AmbiguityRecord, DeadLetter, DeliveryAttempt, EmailMessage
from delivery.services.dead_letters import dead_letter_requeue
from eventlog.models import RecordedEventTypes, ServiceEvent
from eventlog.types import ALL_EVENT_TYPES
from feedback.models import CampaignEventCounter, EmailEvent, MessageEventMark, WebhookDelivery
from feedback.normalize import EventType as E
from feedback.services.processing import events_process
from feedback.services.webhooks import webhook_delivery_process, webhook_delivery_store
from tests import factories
from tests.feedback import samples
from tests.feedback.helpers import T0, campaign, event, sent_messages

pytestmark = pytest.mark.django_db
Status = EmailMessage.Status
IN_FLIGHT = (Status.QUEUED, Status.SCHEDULED, Status.SENDING, Status.AMBIGUOUS)


def _aged(messages: list[EmailMessage], days: float) -> None:
    EmailMessage.objects.filter(pk__in=[m.pk for m in messages]).update(
        created_at=timezone.now() - timedelta(days=days))


def _expire(**options) -> str:
    from io import StringIO
    out = StringIO()
    call_command("expire_data", stdout=out, **options)
    return out.getvalue()


@pytest.fixture
def staff_client(client):
    client.force_login(get_user_model().objects.create_user("ops", password="pw-ops-123", is_staff=True))
    return client


def _figures(api, staff_client, campaign_id: int) -> dict:
    stats = api.get(f"/api/v1/campaigns/{campaign_id}/stats")
    assert stats.status_code == 200, stats.content
    dashboard = staff_client.get("/dashboard/data.json").json()["campaigns"]
    row = next(r for r in dashboard if r["id"] == campaign_id)
    counter = CampaignEventCounter.objects.filter(pk=campaign_id).values().first()
    counter.pop("updated_at")
    counted = {key: value for key, value in stats.json().items() if key != "rows_counted_at"}  # a time
    return {"stats": counted, "dashboard": {k: row[k] for k in ("done", "total")}, "counter": counter,
            "statuses": campaign_status_counts(campaign_id=campaign_id),
            "marks": MessageEventMark.objects.count(), "events": EmailEvent.objects.count(),
            "log": ServiceEvent.objects.count()}


def test_personal_data_is_gone_after_the_retention_and_every_count_stays(api, staff_client, settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 7
    owner = factories.owner()
    RecordedEventTypes.objects.create(service=owner, types=list(ALL_EVENT_TYPES))
    c = campaign()
    fanned = sent_messages(10, campaign_obj=c)
    batch = [event(m, E.DELIVERED) for m in fanned[:8]]
    batch += [event(m, E.OPENED, seconds=90) for m in fanned[:4]]
    batch += [event(fanned[0], E.CLICKED, seconds=100), event(fanned[9], E.BOUNCED, bounce="hard")]
    batch += [event(fanned[1], E.COMPLAINED, seconds=200)]
    events_process(events=batch)
    # A webhook request as an ESP posts it: its raw body names the address.
    webhook = webhook_delivery_store(provider="sendgrid", body=json.dumps([samples.sendgrid_event(
        "open", message_id=fanned[2].id, recipient=fanned[2].recipient, when=T0, event_id="raw-1")]).encode())
    webhook_delivery_process(delivery_id=webhook.id)
    WebhookDelivery.objects.filter(pk=webhook.pk).update(received_at=timezone.now() - timedelta(days=8))

    version = factories.template_version()
    otp = factories.email_message(version=version, client=owner, status=Status.SENT,
                                  recipient="Ada.Lovelace@Example.com", context={"code": "123456"})
    DeliveryAttempt.objects.create(message=otp, provider="smtp", outcome="transient",
                                   error="451 4.2.0 <ada.lovelace@example.com>: mailbox busy")
    AmbiguityRecord.objects.create(message_id=otp.id, kind="settled", reason="esp_lookup",
                                   evidence={"to": ["Ada.Lovelace@Example.com"], "state": "delivered"})
    dead = factories.email_message(version=version, client=owner, status=Status.FAILED,
                                   recipient="grace@example.com", context={"code": "9"},
                                   error="dead-lettered: 550 grace@example.com unknown")
    letter = DeadLetter.objects.create(
        message=dead, payload={"recipient": "grace@example.com", "context": {"code": "9"}, "priority": 0},
        attempts=[{"error": "550 <grace@example.com> unknown"}], final_error="550 grace@example.com unknown")
    young = factories.email_message(version=version, client=owner, status=Status.SENT, context={"code": "1"})
    old = [*fanned, otp, dead]
    _aged(old, 8)
    _aged([young], 6)
    ServiceEvent.objects.update(recorded_at=timezone.now() - timedelta(days=8))
    addresses = {m.pk: m.recipient for m in old}
    before = _figures(api, staff_client, c.id)

    assert "messages" in _expire()

    assert _figures(api, staff_client, c.id) == before
    for message in EmailMessage.objects.filter(pk__in=addresses):
        assert (message.recipient, message.context) == ("", {})
        assert bytes(message.recipient_hash) == recipient_hash(addresses[message.pk])
        assert message.personal_data_removed_at is not None
        assert message.status != Status.QUEUED  # statuses as they were
    assert EmailMessage.objects.get(pk=fanned[9].pk).status == Status.BOUNCED
    kept = EmailMessage.objects.get(pk=young.pk)
    assert kept.recipient == young.recipient and kept.context == {"code": "1"} and kept.recipient_hash is None
    assert DeliveryAttempt.objects.get(message=otp).error == f"451 4.2.0 <{REDACTED}>: mailbox busy"
    assert AmbiguityRecord.objects.get(message_id=otp.id).evidence == {"to": [REDACTED], "state": "delivered"}
    letter.refresh_from_db()
    assert letter.payload == {"recipient": "", "context": {}, "priority": 0}
    assert letter.attempts == [{"error": f"550 <{REDACTED}> unknown"}]
    assert letter.final_error == f"550 {REDACTED} unknown"
    assert EmailMessage.objects.get(pk=dead.pk).error == f"dead-lettered: 550 {REDACTED} unknown"
    assert not EmailEvent.objects.exclude(recipient="").exists()
    assert not EmailEvent.objects.exclude(raw={}).exists()
    assert ServiceEvent.objects.exists()
    assert all(e.data["recipient"] is None for e in ServiceEvent.objects.all())
    assert WebhookDelivery.objects.get(pk=webhook.pk).body == ""
    # What is left is done: a second run finds nothing.
    assert _expire(dry_run=True).startswith("would remove personal data from 0 messages, 0 events")


def test_rows_in_flight_are_never_stripped_until_they_settle(settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 1
    waiting = [sent_messages(1, status=status)[0] for status in IN_FLIGHT]
    _aged(waiting, 400)
    _expire()
    for message in waiting:
        row = EmailMessage.objects.get(pk=message.pk)
        assert row.recipient == message.recipient and row.personal_data_removed_at is None
    EmailMessage.objects.filter(pk=waiting[0].pk).update(status=Status.SENT)  # it was sent at last
    _expire()
    assert EmailMessage.objects.get(pk=waiting[0].pk).recipient == ""
    assert EmailMessage.objects.filter(recipient="").count() == 1


def test_each_stream_keeps_its_own_retention_and_a_deleted_service_the_defaults(settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 7
    owner = factories.owner()
    owner.retention = {"broadcast": {"personal_data_days": 3}}
    owner.save()
    version = factories.template_version()
    news = factories.email_message(version=version, client=owner, status=Status.SENT, stream=Stream.BROADCAST)
    otp = factories.email_message(version=version, client=owner, status=Status.SENT)
    _aged([news, otp], 5)
    gone, _ = service_create(name="gone")
    orphan = factories.email_message(version=version, client=gone, status=Status.DELIVERED)
    orphan_young = factories.email_message(version=version, client=gone, status=Status.DELIVERED)
    _aged([orphan], 8)
    _aged([orphan_young], 5)
    gone.delete()  # its rows keep their facts, owner column NULL
    assert EmailMessage.objects.filter(client__isnull=True).count() == 2
    _expire()
    stripped = EmailMessage.objects.filter(personal_data_removed_at__isnull=False)
    assert set(stripped.values_list("pk", flat=True)) == {news.pk, orphan.pk}


def test_a_stripped_failed_message_is_never_requeued(settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 1
    (failed,) = sent_messages(1, status=Status.FAILED)
    letter = DeadLetter.objects.create(message=failed, payload={"recipient": failed.recipient})
    _aged([failed], 2)
    _expire()
    assert dead_letter_requeue(dead_letter_id=letter.pk) is False
    assert EmailMessage.objects.get(pk=failed.pk).status == Status.FAILED


def test_the_streams_and_states_agree_with_the_models():
    assert set(STREAMS) == set(Stream.values)
    assert set(SETTLED_STATUSES) | set(IN_FLIGHT) == set(Status.values)
    assert not set(SETTLED_STATUSES) & set(IN_FLIGHT)
